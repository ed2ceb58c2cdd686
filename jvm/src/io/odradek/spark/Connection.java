package io.odradek.spark;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/** A plaintext connection to one node: a request (header v1) out, its response (header v0) back. */
final class Connection implements Closeable {
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final byte[] clientId;
    private int correlationId;

    Connection(InetSocketAddress address, String clientId, int timeoutMs) throws IOException {
        socket = new Socket();
        try {
            socket.connect(address, timeoutMs);
            socket.setSoTimeout(timeoutMs);
            socket.setTcpNoDelay(true);
            in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
            out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 16));
        } catch (IOException e) {
            socket.close();
            throw e;
        }
        this.clientId = clientId.getBytes(StandardCharsets.UTF_8);
    }

    /** Sends a request whose body is the concatenation of `body`, and returns the response's body. */
    ByteBuffer call(short apiKey, short apiVersion, byte[]... body) throws IOException {
        int id = ++correlationId;
        int size = 2 + 2 + 4 + 2 + clientId.length;
        for (byte[] part : body) {
            size += part.length;
        }
        out.writeInt(size);
        out.writeShort(apiKey);
        out.writeShort(apiVersion);
        out.writeInt(id);
        out.writeShort(clientId.length);
        out.write(clientId);
        for (byte[] part : body) {
            out.write(part);
        }
        out.flush();
        byte[] response = new byte[in.readInt()];
        in.readFully(response);
        ByteBuffer buffer = ByteBuffer.wrap(response);
        if (buffer.getInt() != id) {
            throw new IOException("the node answered another request than the one sent");
        }
        return buffer;
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
