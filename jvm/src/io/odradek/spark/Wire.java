package io.odradek.spark;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/** Kafka's protocol primitives of the request and response versions this client sends (none flexible). */
final class Wire {
    private Wire() {}

    interface Body {
        void write(DataOutputStream out) throws IOException;
    }

    static byte[] request(Body body) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try {
            body.write(new DataOutputStream(bytes));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    /** A STRING: its UTF-8 length as an int16, then the bytes. */
    static byte[] string(String value) {
        return request(out -> writeString(out, value));
    }

    /** BYTES: the length as an int32, then the bytes. */
    static byte[] bytes(byte[] value) {
        return request(out -> {
            out.writeInt(value.length);
            out.write(value);
        });
    }

    static void writeString(DataOutputStream out, String value) throws IOException {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        out.writeShort(bytes.length);
        out.write(bytes);
    }

    /** A NULLABLE_STRING. */
    static String readString(ByteBuffer in) {
        short length = in.getShort();
        if (length < 0) {
            return null;
        }
        byte[] bytes = new byte[length];
        in.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
