// ToolShell: runs many of Kafka's command-line tools, one after another, in one long-lived JVM.
//
// Each bin/kafka-*.sh script starts a JVM of its own (~1.7 s of the test suite's time); the tools are plain
// `main` methods, so this shell starts one JVM and calls them by reflection. tests/java/tool_shell.py drives
// it over stdin/stdout with this framing (big-endian ints; a "bytes" is an int length, -1 for null, and data):
//
//   request:  int timeoutMs, bytes mainClass, bytes stdin (null: an empty stdin), int argc, argc x bytes arg
//   response: int outcome (0: the run ended, 1: it hung past its timeout), int exitCode, bytes stdout, bytes stderr
//
// What makes a JVM shareable between runs:
// - System.out and System.err are installed once, before any Kafka, log4j or Scala class copies them, as
//   streams that write to the current run's buffers (and to this JVM's stderr between runs), so output
//   printed through a stream a tool or log4j kept from an earlier run still lands in the current run.
// - org.apache.kafka.common.utils.Exit's exit and halt procedures record the first status of a run, silence the
//   run's output (as a real exit would) and throw ExitCalled, which unwinds the tool instead of the JVM.
// - Shutdown hooks a tool adds through Exit.addShutdownHook run when its run ends, as the JVM would run them
//   when it exits (ConsoleProducer closes, and so flushes, its producer in one).
// - System.in is the run's own input.
// After a run that hangs past its timeout the shell answers with what it printed and halts: its threads may
// still be running, so the caller starts a fresh shell.
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.utils.Exit;

public final class ToolShell {

    /** Thrown by the exit and halt procedures: unwinds the tool's thread instead of ending the JVM. */
    static final class ExitCalled extends Error {
        ExitCalled(int status) {
            super("Exit.exit(" + status + ")", null, false, false);
        }
    }

    /** An output stream that writes wherever it is currently pointed. */
    static final class SwitchableStream extends OutputStream {
        private volatile OutputStream target;

        SwitchableStream(OutputStream initial) {
            target = initial;
        }

        void pointTo(OutputStream newTarget) {
            target = newTarget;
        }

        @Override
        public void write(int b) throws IOException {
            OutputStream t = target;
            synchronized (t) {
                t.write(b);
            }
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            OutputStream t = target;
            synchronized (t) {
                t.write(b, off, len);
            }
        }

        @Override
        public void flush() throws IOException {
            OutputStream t = target;
            synchronized (t) {
                t.flush();
            }
        }
    }

    static final OutputStream DISCARD = OutputStream.nullOutputStream();

    /** The state of the run in progress. */
    static final class Run {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final CountDownLatch ended = new CountDownLatch(1);
        final List<Runnable> shutdownHooks = new ArrayList<>();
        volatile Integer exitStatus;
        volatile Throwable uncaught;
    }

    private static SwitchableStream stdout;
    private static SwitchableStream stderr;
    private static volatile Run current;

    public static void main(String[] args) throws Exception {
        DataInputStream requests = new DataInputStream(new BufferedInputStream(new java.io.FileInputStream(FileDescriptor.in)));
        DataOutputStream responses = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)));
        OutputStream jvmStderr = new FileOutputStream(FileDescriptor.err);
        stdout = new SwitchableStream(jvmStderr);
        stderr = new SwitchableStream(jvmStderr);
        System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));

        Exit.setExitProcedure((status, message) -> exit(status));
        Exit.setHaltProcedure((status, message) -> exit(status));
        Exit.setShutdownHookAdder((name, hook) -> {
            Run run = current;
            if (run != null) {
                synchronized (run.shutdownHooks) {
                    run.shutdownHooks.add(hook);
                }
            }
        });

        while (true) {
            int timeoutMs;
            try {
                timeoutMs = requests.readInt();
            } catch (EOFException e) {
                return;
            }
            String mainClass = new String(readBytes(requests), StandardCharsets.UTF_8);
            byte[] input = readBytes(requests);
            String[] toolArgs = new String[requests.readInt()];
            for (int i = 0; i < toolArgs.length; i++) {
                toolArgs[i] = new String(readBytes(requests), StandardCharsets.UTF_8);
            }
            Run run = new Run();
            boolean finished = run(run, mainClass, toolArgs, input, timeoutMs);
            stdout.pointTo(jvmStderr);
            stderr.pointTo(jvmStderr);
            current = null;
            int exitCode = run.exitStatus != null ? run.exitStatus : run.uncaught != null ? 1 : 0;
            responses.writeInt(finished ? 0 : 1);
            responses.writeInt(exitCode);
            writeBytes(responses, run.out.toByteArray());
            writeBytes(responses, run.err.toByteArray());
            responses.flush();
            if (!finished) {
                Runtime.getRuntime().halt(3);
            }
        }
    }

    private static void exit(int status) {
        Run run = current;
        if (run != null) {
            synchronized (run) {
                if (run.exitStatus == null) {
                    run.exitStatus = status;
                    // As after a real exit, nothing the tool prints from now on is seen, bar its shutdown hooks.
                    stdout.pointTo(DISCARD);
                    stderr.pointTo(DISCARD);
                    run.ended.countDown();
                }
            }
        }
        throw new ExitCalled(status);
    }

    /** Runs one tool; false if it did not end (return from main or exit) within the timeout. */
    private static boolean run(Run run, String mainClass, String[] toolArgs, byte[] input, int timeoutMs)
            throws InterruptedException {
        current = run;
        stdout.pointTo(run.out);
        stderr.pointTo(run.err);
        System.setIn(input == null ? InputStream.nullInputStream() : new ByteArrayInputStream(input));
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);

        Thread main = new Thread(() -> {
            try {
                Method method = Class.forName(mainClass).getMethod("main", String[].class);
                method.invoke(null, (Object) toolArgs);
            } catch (InvocationTargetException e) {
                if (!(e.getCause() instanceof ExitCalled)) {
                    run.uncaught = e.getCause();
                }
            } catch (ExitCalled e) {
                // the status is recorded
            } catch (Throwable t) {
                run.uncaught = t;
            } finally {
                if (run.uncaught != null && run.exitStatus == null) {
                    // As the JVM reports an exception escaping main.
                    System.err.print("Exception in thread \"main\" ");
                    run.uncaught.printStackTrace();
                }
                run.ended.countDown();
            }
        }, "main");
        main.setDaemon(true);
        main.start();
        if (!run.ended.await(remainingMs(deadline), TimeUnit.MILLISECONDS)) {
            return false;
        }
        // After an exit main unwinds (its output silenced); if it was another thread of the tool that exited, main
        // may be blocked: it must not go on into the next run.
        main.join(Math.max(1, Math.min(5000, remainingMs(deadline))));
        if (main.isAlive()) {
            main.interrupt();
        }
        return runShutdownHooks(run, deadline);
    }

    /** Runs the run's shutdown hooks concurrently, as the JVM runs them when it exits. */
    private static boolean runShutdownHooks(Run run, long deadline) throws InterruptedException {
        List<Runnable> hooks;
        synchronized (run.shutdownHooks) {
            hooks = new ArrayList<>(run.shutdownHooks);
        }
        if (hooks.isEmpty()) {
            return true;
        }
        stdout.pointTo(run.out);
        stderr.pointTo(run.err);
        List<Thread> threads = new ArrayList<>();
        for (Runnable hook : hooks) {
            Thread thread = new Thread(hook, "shutdown-hook");
            thread.setDaemon(true);
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join(Math.max(1, remainingMs(deadline)));
            if (thread.isAlive()) {
                return false;
            }
        }
        return true;
    }

    private static long remainingMs(long deadlineNanos) {
        return Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime()));
    }

    private static byte[] readBytes(DataInputStream in) throws IOException {
        int length = in.readInt();
        if (length < 0) {
            return null;
        }
        byte[] bytes = new byte[length];
        in.readFully(bytes);
        return bytes;
    }

    private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeInt(bytes.length);
        out.write(bytes);
    }
}
