"""sasl.jaas.config parsing: Kafka's JaasContextTest cases and the StreamTokenizer details Kafka inherits
(expected results checked against Kafka 4.0's JaasContext)."""

import pytest

from odradek.config import ConfigError
from odradek.security.jaas import JaasEntry, parse_jaas_config

LISTENER_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


def test_kafka_documented_plain_server_config():
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";', key=LISTENER_KEY)
    assert entry == JaasEntry("org.apache.kafka.common.security.plain.PlainLoginModule", "required", {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"})


def test_whitespace_newlines_and_comments_anywhere():
    entry = parse_jaas_config("""
        org.apache.kafka.common.security.scram.ScramLoginModule   // the module
        REQUIRED /* flags are case-insensitive */
            username = "alice"
            password='alice-secret'
        ;
    """)
    assert entry == JaasEntry("org.apache.kafka.common.security.scram.ScramLoginModule", "required",
                              {"username": "alice", "password": "alice-secret"})


@pytest.mark.parametrize("flag", ["required", "requisite", "sufficient", "optional", "Sufficient", '"optional"'])
def test_control_flags(flag):
    assert parse_jaas_config(f"test.Module {flag} propName=propValue;").control_flag == flag.strip('"').lower()


def test_no_options():
    assert parse_jaas_config("test.testConfigNoOptions required;").options == {}


def test_quoted_values_and_names():
    entry = parse_jaas_config('test.Module required propName="prop value" propName2="value1 = 1, value2 = 2" '
                              '"prop name"=propValue option1="3";')
    assert entry.options == {"propName": "prop value", "propName2": "value1 = 1, value2 = 2",
                             "prop name": "propValue", "option1": "3"}


@pytest.mark.parametrize("quoted, value", [
    (r'"say \"hi\""', 'say "hi"'),
    (r"'it\'s'", "it's"),
    (r'"back\\slash"', "back\\slash"),
    (r'"tab\tnew\nline"', "tab\tnew\nline"),
    (r'"\101\60\477"', "A0'7"),  # octal escapes, at most \377
    (r'"\q"', "q"),  # any other escaped character is itself
])
def test_backslash_escapes_in_quoted_values(quoted, value):
    assert parse_jaas_config(f"test.Module required key={quoted};").options == {"key": value}


def test_unquoted_values_may_hold_dots_dashes_digits_and_dollars():
    entry = parse_jaas_config("test.Module required a=admin-secret b=v1.2 c=$ecret_3 d=résumé;")
    assert entry.options == {"a": "admin-secret", "b": "v1.2", "c": "$ecret_3", "d": "résumé"}


def test_a_later_option_replaces_an_earlier_one():
    assert parse_jaas_config("test.Module required a=x a=y;").options == {"a": "y"}


def test_a_slash_starts_a_comment():
    # Java's StreamTokenizer treats a lone "/" as a comment to the end of the line
    entry = parse_jaas_config('test.Module required path="/tmp/x" a=b / c=d\n;')
    assert entry.options == {"path": "/tmp/x", "a": "b"}


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified in JAAS config"),
    ("   // only a comment", "Login module not specified in JAAS config"),
    ("  required option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
    ("test.loginModule option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
    ("test.loginModule", "Login module control flag not specified in JAAS config"),
    ("test.testInvalidControlFlag { option1=3;", "Login module control flag is not available in the JAAS config"),
    ("loginModule required option1;", "Value not specified for key 'option1' in JAAS config"),
    ("loginModule required option1=;", "Value not specified for key 'option1' in JAAS config"),
    ("test.testNumericOptionWithoutQuotes required option1=3;", "Value not specified for key 'option1'"),
    ("test.Module required option1=-x;", "Value not specified for key 'option1'"),
    ("test.Module required option1:x;", "Value not specified for key 'option1'"),
    ("test.testMissingSemicolon required option1=value1", "JAAS config entry not terminated by semi-colon"),
    ('"" required;', "Login module not specified in JAAS config"),
    ("test.Module required = x;", "Option name expected in JAAS config"),
    ("a required; b required;", "JAAS config property contains 2 login modules, should be 1 module"),
])
def test_malformed_config_is_a_config_error_naming_the_key(text, message):
    with pytest.raises(ConfigError, match=f"^{LISTENER_KEY}: .*{message}") as failure:
        parse_jaas_config(text, key=LISTENER_KEY)
    assert "secret" not in str(failure.value)


def test_error_does_not_repeat_the_password():
    with pytest.raises(ConfigError) as failure:
        parse_jaas_config('test.Module required password="hunter2"', key="sasl.jaas.config")
    assert "hunter2" not in str(failure.value)
