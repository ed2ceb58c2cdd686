package io.odradek.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * `format("odradek")` with this jar on Spark's classpath: the Python data source of the same name (registered
 * with `spark.dataSource.register(OdradekDataSource)`) for everything, except the writes that
 * {@link SinkSettings} takes, which run in the executors' JVMs with no Python worker at all.
 */
public final class OdradekProvider extends PythonDataSourceV2 implements DataSourceRegister {
    static final String NAME = "odradek";

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new OdradekTable(super.getTable(schema, partitioning, properties));
    }

    /** The Python data source's table, whose writes this sink takes where it can. */
    static final class OdradekTable implements SupportsRead, SupportsWrite {
        private final Table python;

        OdradekTable(Table python) {
            this.python = python;
        }

        @Override
        public String name() {
            return python.name();
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return python.schema();
        }

        @Override
        public Column[] columns() {
            return python.columns();
        }

        @Override
        public Set<TableCapability> capabilities() {
            Set<TableCapability> capabilities = EnumSet.noneOf(TableCapability.class);
            capabilities.addAll(python.capabilities());
            return capabilities;
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return ((SupportsRead) python).newScanBuilder(options);
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            return new OdradekWriteBuilder(((SupportsWrite) python).newWriteBuilder(info), info);
        }
    }

    /**
     * Builds this sink's write where {@link SinkSettings} takes it, else the Python data source's; a truncating
     * write (save mode overwrite, streaming complete mode) is the Python data source's to refuse.
     */
    static final class OdradekWriteBuilder implements WriteBuilder, SupportsTruncate {
        private WriteBuilder python;
        private final LogicalWriteInfo info;
        private boolean truncate;

        OdradekWriteBuilder(WriteBuilder python, LogicalWriteInfo info) {
            this.python = python;
            this.info = info;
        }

        @Override
        public WriteBuilder truncate() {
            if (python instanceof SupportsTruncate) {
                python = ((SupportsTruncate) python).truncate();
            }
            truncate = true;
            return this;
        }

        @Override
        public Write build() {
            WriteBuilder delegate = python;
            boolean truncating = truncate;
            return new Write() {
                private Write pythonWrite;

                private Write pythonWrite() {
                    if (pythonWrite == null) {
                        pythonWrite = delegate.build();
                    }
                    return pythonWrite;
                }

                @Override
                public String description() {
                    return "odradek";
                }

                @Override
                public BatchWrite toBatch() {
                    SinkSettings settings = truncating ? null : SinkSettings.of(info.options(), info.schema(), false);
                    return settings == null ? pythonWrite().toBatch() : new RowWriters.PlainWrite(settings);
                }

                @Override
                public StreamingWrite toStreaming() {
                    SinkSettings settings = truncating ? null : SinkSettings.of(info.options(), info.schema(), true);
                    if (settings == null) {
                        return pythonWrite().toStreaming();
                    }
                    return settings.sinkId == null
                            ? new RowWriters.PlainWrite(settings) : new ExactlyOnceWrite(settings);
                }
            };
        }
    }
}
