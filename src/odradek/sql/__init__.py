"""Streaming SQL in a ksqlDB-compatible dialect: the parser and its typed AST."""
