package io.odradek.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.Collection;
import java.util.Locale;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.crypto.spec.SecretKeySpec;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * How a connection gets in, from librdkafka's settings as the Python sink takes them: TLS (the CA of
 * `ssl.ca.location` or `ssl.ca.pem`, else the JVM's; a client certificate and unencrypted PKCS#8 key for mutual
 * TLS; the host name checked unless `ssl.endpoint.identification.algorithm=none`), then SASL PLAIN or SCRAM.
 */
final class Security implements Serializable {
    private static final long serialVersionUID = 1L;
    static final short SASL_HANDSHAKE = 17;
    static final short SASL_AUTHENTICATE = 36;

    final boolean tls;
    final String mechanism;  // null: no SASL
    private final String username;
    private final String password;
    private final String caLocation;
    private final String caPem;
    private final String certificateLocation;
    private final String keyLocation;
    private final boolean checkHostname;
    private final boolean verify;
    private transient SSLContext context;

    /** The security these settings ask for; {@link #refusal} says first whether this client can give it. */
    Security(Map<String, String> kafka) {
        String protocol = protocolOf(kafka);
        tls = protocol.endsWith("ssl");
        mechanism = protocol.startsWith("sasl") ? mechanismOf(kafka) : null;
        username = kafka.get("sasl.username");
        password = kafka.get("sasl.password");
        caLocation = kafka.get("ssl.ca.location");
        caPem = kafka.get("ssl.ca.pem");
        certificateLocation = kafka.get("ssl.certificate.location");
        keyLocation = kafka.get("ssl.key.location");
        verify = !"false".equalsIgnoreCase(kafka.getOrDefault("enable.ssl.certificate.verification", "true").trim());
        checkHostname = verify && !"none".equalsIgnoreCase(
                kafka.getOrDefault("ssl.endpoint.identification.algorithm", "https").trim());
    }

    /** Why this client cannot give the security these settings ask for, or null if it can. */
    static String refusal(Map<String, String> kafka) {
        String protocol = protocolOf(kafka);
        switch (protocol) {
            case "plaintext":
            case "ssl":
            case "sasl_plaintext":
            case "sasl_ssl":
                break;
            default:
                return "it does not know kafka.security.protocol=" + protocol;
        }
        if (protocol.startsWith("sasl")) {
            String mechanism = mechanismOf(kafka);
            if (!mechanism.equals("PLAIN") && !mechanism.equals("SCRAM-SHA-256")
                    && !mechanism.equals("SCRAM-SHA-512")) {
                return "it logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not " + mechanism;
            }
            if (kafka.get("sasl.username") == null || kafka.get("sasl.password") == null) {
                return "sasl.mechanism=" + mechanism + " needs sasl.username and sasl.password";
            }
        }
        if (kafka.containsKey("ssl.key.password")) {
            return "it reads unencrypted keys only, not one with kafka.ssl.key.password";
        }
        String algorithm = kafka.getOrDefault("ssl.endpoint.identification.algorithm", "https").trim();
        if (!algorithm.equalsIgnoreCase("https") && !algorithm.equalsIgnoreCase("none")) {
            return "ssl.endpoint.identification.algorithm is https or none, not " + algorithm;
        }
        return null;
    }

    private static String protocolOf(Map<String, String> kafka) {
        return kafka.getOrDefault("security.protocol", "plaintext").trim().toLowerCase(Locale.ROOT);
    }

    private static String mechanismOf(Map<String, String> kafka) {
        return kafka.getOrDefault("sasl.mechanism", kafka.getOrDefault("sasl.mechanisms", "GSSAPI"))
                .trim().toUpperCase(Locale.ROOT);
    }

    /** What tells these settings apart from others, for kept producers. */
    String key() {
        return String.join("\u0000", String.valueOf(tls), String.valueOf(mechanism), String.valueOf(username),
                String.valueOf(password), String.valueOf(caLocation), String.valueOf(caPem),
                String.valueOf(certificateLocation), String.valueOf(keyLocation), String.valueOf(checkHostname),
                String.valueOf(verify));
    }

    /** The socket wrapped in TLS, when the settings ask for it. */
    Socket wrap(Socket plain, String host, int port) throws IOException {
        if (!tls) {
            return plain;
        }
        SSLSocket socket = (SSLSocket) context().getSocketFactory().createSocket(plain, host, port, true);
        if (checkHostname) {
            SSLParameters parameters = socket.getSSLParameters();
            parameters.setEndpointIdentificationAlgorithm("HTTPS");
            socket.setSSLParameters(parameters);
        }
        socket.startHandshake();
        return socket;
    }

    private synchronized SSLContext context() throws IOException {
        if (context == null) {
            try {
                context = SSLContext.getInstance("TLS");
                context.init(keyManagers(), trustManagers(), new SecureRandom());
            } catch (GeneralSecurityException e) {
                throw new IOException("TLS settings: " + e.getMessage(), e);
            }
        }
        return context;
    }

    private TrustManager[] trustManagers() throws GeneralSecurityException, IOException {
        if (!verify) {
            return new TrustManager[] {new X509TrustManager() {
                @Override
                public void checkClientTrusted(X509Certificate[] chain, String authType) {}

                @Override
                public void checkServerTrusted(X509Certificate[] chain, String authType) {}

                @Override
                public X509Certificate[] getAcceptedIssuers() {
                    return new X509Certificate[0];
                }
            }};
        }
        TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        if (caPem == null && (caLocation == null || caLocation.equals("probe"))) {
            factory.init((KeyStore) null);  // the JVM's own CAs
            return factory.getTrustManagers();
        }
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        int n = 0;
        for (Certificate certificate : certificates(caPem != null
                ? caPem.getBytes(StandardCharsets.US_ASCII) : Files.readAllBytes(Paths.get(caLocation)))) {
            store.setCertificateEntry("ca-" + n++, certificate);
        }
        factory.init(store);
        return factory.getTrustManagers();
    }

    private javax.net.ssl.KeyManager[] keyManagers() throws GeneralSecurityException, IOException {
        if (certificateLocation == null || keyLocation == null) {
            return null;
        }
        Collection<? extends Certificate> chain = certificates(Files.readAllBytes(Paths.get(certificateLocation)));
        PrivateKey key = privateKey(new String(Files.readAllBytes(Paths.get(keyLocation)), StandardCharsets.US_ASCII));
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        store.setKeyEntry("client", key, new char[0], chain.toArray(new Certificate[0]));
        KeyManagerFactory factory = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        factory.init(store, new char[0]);
        return factory.getKeyManagers();
    }

    private static Collection<? extends Certificate> certificates(byte[] pem) throws GeneralSecurityException {
        try (InputStream in = new ByteArrayInputStream(pem)) {
            return CertificateFactory.getInstance("X.509").generateCertificates(in);
        } catch (IOException e) {
            throw new GeneralSecurityException(e);
        }
    }

    private static PrivateKey privateKey(String pem) throws GeneralSecurityException {
        String begin = "-----BEGIN PRIVATE KEY-----";
        int start = pem.indexOf(begin);
        int end = pem.indexOf("-----END PRIVATE KEY-----");
        if (start < 0 || end < 0) {
            throw new GeneralSecurityException("ssl.key.location: not an unencrypted PKCS#8 key (BEGIN PRIVATE KEY)");
        }
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(start + begin.length(), end));
        GeneralSecurityException last = null;
        for (String algorithm : new String[] {"RSA", "EC", "Ed25519"}) {
            try {
                return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
            } catch (GeneralSecurityException e) {
                last = e;
            }
        }
        throw last;
    }

    /** SaslHandshake and SaslAuthenticate on a new connection; an IOException names the broker's reason. */
    void authenticate(Connection connection) throws IOException {
        if (mechanism == null) {
            return;
        }
        ByteBuffer handshake = connection.call(SASL_HANDSHAKE, (short) 1, Wire.string(mechanism));
        short error = handshake.getShort();
        if (error != 0) {
            throw new AuthenticationException("SASL mechanism " + mechanism + " refused: "
                    + KafkaErrors.describe(error, null));
        }
        if (mechanism.equals("PLAIN")) {
            exchange(connection, ("\0" + username + "\0" + password).getBytes(StandardCharsets.UTF_8));
            return;
        }
        scram(connection, mechanism.equals("SCRAM-SHA-256") ? "SHA-256" : "SHA-512");
    }

    private void scram(Connection connection, String hash) throws IOException {
        byte[] random = new byte[24];
        new SecureRandom().nextBytes(random);
        String nonce = Base64.getEncoder().withoutPadding().encodeToString(random);
        String clientFirstBare = "n=" + username.replace("=", "=3D").replace(",", "=2C") + ",r=" + nonce;
        String serverFirst = new String(exchange(connection, ("n,," + clientFirstBare).getBytes(StandardCharsets.UTF_8)),
                StandardCharsets.UTF_8);
        String serverNonce = null;
        byte[] salt = null;
        int iterations = 0;
        for (String part : serverFirst.split(",")) {
            if (part.startsWith("r=")) {
                serverNonce = part.substring(2);
            } else if (part.startsWith("s=")) {
                salt = Base64.getDecoder().decode(part.substring(2));
            } else if (part.startsWith("i=")) {
                iterations = Integer.parseInt(part.substring(2));
            }
        }
        if (serverNonce == null || !serverNonce.startsWith(nonce) || salt == null || iterations <= 0) {
            throw new AuthenticationException("SCRAM: an unexpected server-first message");
        }
        String mac = "Hmac" + hash.replace("-", "");
        try {
            SecretKeyFactory pbkdf2 = SecretKeyFactory.getInstance("PBKDF2With" + mac);
            int bits = hash.equals("SHA-256") ? 256 : 512;
            byte[] salted = pbkdf2.generateSecret(new PBEKeySpec(password.toCharArray(), salt, iterations, bits))
                    .getEncoded();
            byte[] clientKey = hmac(mac, salted, "Client Key".getBytes(StandardCharsets.UTF_8));
            byte[] storedKey = MessageDigest.getInstance(hash).digest(clientKey);
            String clientFinalWithoutProof = "c=biws,r=" + serverNonce;
            byte[] authMessage = (clientFirstBare + "," + serverFirst + "," + clientFinalWithoutProof)
                    .getBytes(StandardCharsets.UTF_8);
            byte[] signature = hmac(mac, storedKey, authMessage);
            byte[] proof = new byte[clientKey.length];
            for (int i = 0; i < proof.length; i++) {
                proof[i] = (byte) (clientKey[i] ^ signature[i]);
            }
            String serverFinal = new String(exchange(connection, (clientFinalWithoutProof + ",p="
                    + Base64.getEncoder().encodeToString(proof)).getBytes(StandardCharsets.UTF_8)),
                    StandardCharsets.UTF_8);
            byte[] serverKey = hmac(mac, salted, "Server Key".getBytes(StandardCharsets.UTF_8));
            String expected = "v=" + Base64.getEncoder().encodeToString(hmac(mac, serverKey, authMessage));
            if (!serverFinal.equals(expected)) {
                throw new AuthenticationException("SCRAM: the server's signature does not match");
            }
        } catch (GeneralSecurityException e) {
            throw new IOException("SCRAM: " + e.getMessage(), e);
        }
    }

    private static byte[] hmac(String algorithm, byte[] key, byte[] data) throws GeneralSecurityException {
        Mac mac = Mac.getInstance(algorithm);
        mac.init(new SecretKeySpec(key, algorithm));
        return mac.doFinal(data);
    }

    /** One SaslAuthenticate (v1): the client's bytes out, the server's back, or its refusal. */
    private static byte[] exchange(Connection connection, byte[] bytes) throws IOException {
        ByteBuffer response = connection.call(SASL_AUTHENTICATE, (short) 1, Wire.bytes(bytes));
        short error = response.getShort();
        String message = Wire.readString(response);
        if (error != 0) {
            throw new AuthenticationException("authentication failed: " + KafkaErrors.describe(error, message));
        }
        byte[] answer = new byte[response.getInt()];
        response.get(answer);
        return answer;
    }

    /** Refused credentials: not worth trying again with another node. */
    static final class AuthenticationException extends IOException {
        private static final long serialVersionUID = 1L;

        AuthenticationException(String message) {
            super(message);
        }
    }
}
