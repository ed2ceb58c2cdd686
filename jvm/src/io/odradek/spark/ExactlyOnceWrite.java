package io.odradek.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * The exactly-once streaming sink (docs/spark.md, "Exactly-once"), by the protocol of the Python data source's
 * (sink.py) and with the same transactional ids and markers ({@link CommitsLog}), so either can replay a batch the
 * other wrote. Each task of micro-batch N:
 * <ul>
 *   <li>starts a new epoch of its transactional id (the sink's and the task's), which fences every earlier
 *       attempt of the task and aborts what it left open;</li>
 *   <li>then reads the markers: if the driver committed batch N, or an earlier attempt of the task did it, the
 *       task's rows are dropped;</li>
 *   <li>else writes its rows and its marker `done/(sink)/(task) = N` in one transaction, and commits it.</li>
 * </ul>
 * The driver's commit of batch N appends `commit/(sink) = N`, after which no replay of N writes anything. The
 * fencing and the read run on another thread while Spark computes the task's first rows.
 */
final class ExactlyOnceWrite implements StreamingWrite {
    // Spark's MicroBatchExecution sets these local properties on every task of a micro-batch: the batch id, and
    // the query id kept in the checkpoint (a new checkpoint, whose batch ids start at 0 again, gets a new one).
    private static final String BATCH_ID_PROPERTY = "streaming.sql.batchId";
    private static final String QUERY_ID_PROPERTY = "sql.streaming.queryId";
    private static final ExecutorService PREPARING = Executors.newCachedThreadPool(runnable -> {
        Thread thread = new Thread(runnable, "odradek-sink-fence");
        thread.setDaemon(true);
        return thread;
    });

    private final SinkSettings settings;

    /** On the driver: the markers' topic is made before any task looks for it. */
    ExactlyOnceWrite(SinkSettings settings) {
        this.settings = settings;
        Producer producer = null;
        try {
            producer = ProducerPool.borrow(settings, null);
            CommitsLog.ensureTopic(producer, System.currentTimeMillis() + settings.deliveryTimeoutMs);
        } catch (IOException e) {
            if (producer != null) {
                producer.close();
            }
            throw new UncheckedIOException(e);
        }
        ProducerPool.giveBack(settings, null, producer);
    }

    /** What a task tells the driver. */
    static final class TaskCommit implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
        final int task;
        final long written;
        final long skipped;
        final String sinkId;

        TaskCommit(int task, long written, long skipped, String sinkId) {
            this.task = task;
            this.written = written;
            this.skipped = skipped;
            this.sinkId = sinkId;
        }
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
        return new Factory(settings);
    }

    @Override
    public boolean useCommitCoordinator() {
        return true;
    }

    /** Marks batch `epochId` committed for each sink id its tasks wrote under (none if no task ran). */
    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {
        Set<String> sinkIds = new LinkedHashSet<>();
        for (WriterCommitMessage message : messages) {
            if (message instanceof TaskCommit) {
                sinkIds.add(((TaskCommit) message).sinkId);
            }
        }
        if (sinkIds.isEmpty()) {
            return;
        }
        Producer producer = null;
        try {
            producer = ProducerPool.borrow(settings, null);
            for (String sinkId : sinkIds) {
                CommitsLog.append(producer, CommitsLog.commitKey(sinkId), CommitsLog.batchValue(epochId));
            }
        } catch (IOException e) {
            if (producer != null) {
                producer.close();
            }
            throw new UncheckedIOException(e);
        }
        ProducerPool.giveBack(settings, null, producer);
    }

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {}

    static final class Factory implements StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final SinkSettings settings;

        Factory(SinkSettings settings) {
            this.settings = settings;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new TransactionalRowWriter(settings, partitionId, epochId);
        }
    }

    /** A task's producer, its new epoch started, and whether the markers say its batch is done already. */
    private static final class Prepared {
        final Producer producer;
        final boolean done;

        Prepared(Producer producer, boolean done) {
            this.producer = producer;
            this.done = done;
        }
    }

    static final class TransactionalRowWriter implements DataWriter<InternalRow> {
        private final SinkSettings settings;
        private final int task;
        private final long batch;
        private final String sinkId;
        private final String transactionalId;
        private final Future<Prepared> preparing;
        private Prepared prepared;
        private boolean committed;
        private long written;
        private long skipped;

        TransactionalRowWriter(SinkSettings settings, int task, long epochId) {
            this.settings = settings;
            this.task = task;
            TaskContext context = TaskContext.get();
            String batchId = context == null ? null : context.getLocalProperty(BATCH_ID_PROPERTY);
            batch = batchId == null ? epochId : Long.parseLong(batchId);
            String queryId = context == null ? null : context.getLocalProperty(QUERY_ID_PROPERTY);
            sinkId = queryId == null || queryId.isEmpty() ? settings.sinkId : settings.sinkId + "#" + queryId;
            transactionalId = CommitsLog.transactionalId(sinkId, task);
            preparing = PREPARING.submit(this::prepare);
        }

        private Prepared prepare() throws IOException {
            Producer producer = ProducerPool.borrow(settings, transactionalId);
            try {
                producer.initTransactions();
                CommitsLog.SinkState state = CommitsLog.read(producer, settings.clusterKey(), sinkId,
                        System.currentTimeMillis() + settings.deliveryTimeoutMs);
                return new Prepared(producer, state.isDone(batch, task));
            } catch (IOException | RuntimeException e) {
                producer.close();
                throw e;
            }
        }

        private Prepared prepared() throws IOException {
            if (prepared == null) {
                prepared = Waits.result(preparing);
            }
            return prepared;
        }

        @Override
        public void write(InternalRow row) throws IOException {
            Prepared p = prepared();
            if (p.done) {
                skipped++;
                return;
            }
            RowWriters.send(p.producer, settings, row);
            written++;
        }

        @Override
        public WriterCommitMessage commit() throws IOException {
            Prepared p = prepared();
            if (!p.done) {
                p.producer.send(CommitsLog.TOPIC, 0, CommitsLog.doneKey(sinkId, task), CommitsLog.batchValue(batch),
                        System.currentTimeMillis(), null);
                p.producer.commitTransaction();
            }
            committed = true;
            return new TaskCommit(task, written, skipped, sinkId);
        }

        @Override
        public void abort() {
            if (prepared != null && !prepared.done) {
                try {
                    prepared.producer.abortTransaction();
                } catch (IOException | RuntimeException ignored) {
                    // the next attempt's new epoch aborts it anyway
                }
            }
        }

        @Override
        public void close() {
            Prepared p;
            try {
                p = prepared();
            } catch (IOException | RuntimeException e) {
                if (Thread.currentThread().isInterrupted()) {  // a killed task: close what prepare() still makes
                    PREPARING.submit(() -> {
                        Waits.result(preparing).producer.close();
                        return null;
                    });
                }
                return;  // otherwise prepare() failed, and closed its producer
            }
            if (committed) {
                ProducerPool.giveBack(settings, transactionalId, p.producer);
            } else {
                p.producer.close();
            }
        }
    }
}
