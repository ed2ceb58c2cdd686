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

/**
 * A connection to one node, through TLS and SASL when the settings ask for them: a request (header v1) out, its
 * response (header v0) back.
 */
final class Connection implements Closeable {
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final byte[] clientId;
    private int correlationId;

    Connection(InetSocketAddress address, SinkSettings settings, int timeoutMs) throws IOException {
        Socket plain = new Socket();
        Socket connected = plain;
        clientId = settings.clientId.getBytes(StandardCharsets.UTF_8);
        try {
            plain.connect(address, timeoutMs);
            plain.setSoTimeout(timeoutMs);
            plain.setTcpNoDelay(true);
            connected = settings.security.wrap(plain, address.getHostString(), address.getPort());
            in = new DataInputStream(new BufferedInputStream(connected.getInputStream(), 1 << 16));
            out = new DataOutputStream(new BufferedOutputStream(connected.getOutputStream(), 1 << 16));
            socket = connected;
            settings.security.authenticate(this);
        } catch (IOException | RuntimeException e) {
            connected.close();
            throw e;
        }
    }

    /** Sends a request whose body is the concatenation of `body`, and returns the response's body. */
    synchronized ByteBuffer call(short apiKey, short apiVersion, byte[]... body) throws IOException {
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
