#!/usr/bin/env bash
# A certificate authority and the certificates of a SASL_SSL node and a client, made with openssl:
#   examples/secure_node/make-certificates.sh DIR [NODE_HOST]
# DIR/ca.pem          the authority: the truststore of the node and of every client
# DIR/node.pem        the node's keystore: its private key (PKCS#8) and certificate chain, for NODE_HOST,
#                     localhost and 127.0.0.1
# DIR/client.crt/.key a client certificate (CN=client), for listeners with ssl.client.auth
set -euo pipefail
dir=${1:?usage: make-certificates.sh DIR [NODE_HOST]}
host=${2:-localhost}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj "/CN=Odradek example CA" \
    -keyout ca.key -out ca.pem 2>/dev/null
issue() {  # issue NAME SUBJECT_ALT_NAMES
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -keyout "$1.key" \
        -out "$1.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$2" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -extfile "$1.ext" \
        -out "$1.crt" 2>/dev/null
    rm "$1.csr" "$1.ext"
}
issue node "DNS:$host,DNS:localhost,IP:127.0.0.1"
cat node.key node.crt ca.pem > node.pem
issue client "DNS:localhost"
echo "made $dir/ca.pem, $dir/node.pem, $dir/client.crt, $dir/client.key"
