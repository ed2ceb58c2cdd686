"""Principals, ssl.principal.mapping.rules (Kafka's SslPrincipalMapperTest cases) and certificate subject names
as Java's X500Principal.getName() writes them (expected names checked against Java 17 and 25)."""

import pytest

from odradek.config import ConfigError
from odradek.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRule,
    PrincipalMappingRule,
    SslPrincipalMapper,
    distinguished_name,
    principal_from_certificate,
)


def test_principal_prints_and_parses_as_type_colon_name():
    alice = KafkaPrincipal("User", "alice")
    assert str(alice) == "User:alice"
    assert KafkaPrincipal.parse("User:alice") == alice
    assert KafkaPrincipal.parse("User:CN=a:b,O=c") == KafkaPrincipal("User", "CN=a:b,O=c")
    assert KafkaPrincipal.parse("User:*") == KafkaPrincipal("User", "*")
    assert str(ANONYMOUS) == "User:ANONYMOUS"


@pytest.mark.parametrize("text", ["alice", "", ":alice"])
def test_principal_without_a_type_is_refused(text):
    with pytest.raises(ValueError, match="principalType:principalName"):
        KafkaPrincipal.parse(text)


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules_are_accepted(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_are_a_config_error_naming_the_setting(rules):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper(rules)


def test_invalid_rule_message_shows_what_was_left_over():
    with pytest.raises(ConfigError, match="Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"):
        SslPrincipalMapper("DEFAULT/L")


def test_first_matching_rule_maps_the_name():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.map("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.map("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.map("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.map("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.map("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("rules, expected", [
    ("", "[]"),
    ("DEFAULT", "[DEFAULT]"),
    ("RULE://", "[RULE:/]"),
    ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"),
    ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
    ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    # empty rules are skipped
    (",   , , ,      , , ,   ", "[]"),
    (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
    ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
    # escapes
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
    # a comma splits rules only after a complete rule
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]"),
])
def test_rules_split_as_kafka_splits_them(rules, expected):
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_escaped_comma_with_whitespace_in_a_name():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.map("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_matching_rule_names_the_name_and_the_rules():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
    with pytest.raises(NoMatchingRule) as failure:
        mapper.map("CN=alice,OU=Staff")
    assert str(failure.value) == "No rules apply to CN=alice,OU=Staff, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L]"


def test_no_rules_at_all_match_nothing():
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("").map("CN=alice")


@pytest.mark.parametrize("rule, name, expected", [
    ("RULE:^CN=(.*)$/$1/", "CN=alice", "alice"),
    ("RULE:^CN=(.*)$/$0/", "CN=alice", "CN=alice"),  # $0: the whole match
    ("RULE:^CN=(.*)$/\\$1/", "CN=alice", "$1"),  # \$: a literal dollar
    ("RULE:^CN=(.*)$/$1@$2/", "CN=alice", "alice@$2"),  # Kafka: a group that does not exist is literal text
    ("RULE:^CN=(.*)$/$12/", "CN=alice", "alice2"),  # Java: group 1 then "2", as there is no group 12
    ("RULE:^(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)$/$12$1/", "abcdefghijkl", "la"),
    ("RULE:^CN=(.*)$/$1\\\\/", "CN=alice", "alice\\"),  # \\: a literal backslash
    ("RULE:^CN=(?P<who>.*)$/${who}/", "CN=alice", "alice"),  # (Python's spelling of a named group)
    ("RULE:^CN=(x)?(.*)$/[$1]$2/", "CN=alice", "[]alice"),  # a group that took no part is empty
    ("RULE:(.*?)/X$1/", "abc", "XaXbXcX"),  # replaceAll: every match, moving on after an empty one
])
def test_replacements_follow_java(rule, name, expected):
    assert SslPrincipalMapper(rule).map(name) == expected


@pytest.mark.parametrize("rules", [
    "RULE:^CN=.*$/$1/",  # no groups: Java fails when the rule is used, Odradek at configuration
    "RULE:^CN=(.*)$/$/",
    "RULE:^CN=(.*)$/$x/",
    "RULE:^CN=(.*)$/${nope}/",
    "RULE:^CN=([a-z/",
])
def test_rules_that_cannot_work_are_refused_at_configuration(rules):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper(rules)


def test_a_trailing_backslash_escapes_nothing():
    with pytest.raises(ConfigError, match="character to be escaped is missing"):
        PrincipalMappingRule("^CN=(.*)$", "$1\\")


@pytest.mark.parametrize("subject, expected", [
    (((("countryName", "US"),), (("organizationName", "Acme, Inc."),), (("commonName", "alice"),)),
     "CN=alice,O=Acme\\, Inc.,C=US"),
    (((("countryName", "US"),), (("stateOrProvinceName", "CA"),), (("localityName", "Palo Alto"),),
      (("streetAddress", "1 Main St"),), (("organizationName", "Org"),), (("organizationalUnitName", "Unit"),),
      (("commonName", "x"),)),
     "CN=x,OU=Unit,O=Org,STREET=1 Main St,L=Palo Alto,ST=CA,C=US"),
    # multi-valued RDNs keep their order and join with "+"
    (((("domainComponent", "com"),), (("domainComponent", "example"),),
      (("organizationalUnitName", "Eng"), ("organizationalUnitName", "Ops")),
      (("commonName", "bob"), ("userId", "b123"))),
     "CN=bob+UID=b123,OU=Eng+OU=Ops,DC=example,DC=com"),
    # attributes without an RFC 2253 keyword: OID=#hex of the DER value
    (((("commonName", "alice"),), (("emailAddress", "alice@example.com"),)),
     "1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,CN=alice"),
    (((("serialNumber", "12345"),), (("title", "Boss"),), (("surname", "Smith"),), (("givenName", "John"),),
      (("commonName", "j"),)),
     "CN=j,2.5.4.42=#0c044a6f686e,2.5.4.4=#0c05536d697468,2.5.4.12=#0c04426f7373,"
     "2.5.4.5=#13053132333435"),
    (((("givenName", "Zoë"),), (("dnQualifier", "q1"),)), "2.5.4.46=#13027131,2.5.4.42=#0c045a6fc3ab"),
    (((("1.2.3.4", "x"),),), "1.2.3.4=#0c0178"),  # an OID OpenSSL does not name: taken to be a UTF8String
    # escaping: Java also escapes "=" and "#" anywhere, and every leading and trailing space
    (((("commonName", " lead and trail "),),), "CN=\\ lead and trail\\ "),
    (((("commonName", "   "),),), "CN=\\ \\ \\ "),
    (((("commonName", "#hash=eq+plus"),),), "CN=\\#hash\\=eq\\+plus"),
    (((("commonName", 'semi;colon<lt>gt"quote\\back'),),), 'CN=semi\\;colon\\<lt\\>gt\\"quote\\\\back'),
    (((("commonName", "\\ x"),), (("organizationalUnitName", "a=b"),), (("organizationName", "#lead"),),
      (("localityName", "trail#"),), (("stateOrProvinceName", " "),), (("countryName", "XY"),)),
     "C=XY,ST=\\ ,L=trail\\#,O=\\#lead,OU=a\\=b,CN=\\\\ x"),
    (((("commonName", "nul\0"),),), "CN=nul\\00"),
    (((("commonName", "Zoë Ünicode 日本"),),), "CN=Zoë Ünicode 日本"),
    ((), ""),
])
def test_distinguished_name_is_what_java_prints(subject, expected):
    assert distinguished_name(subject) == expected


def test_long_values_use_long_der_lengths():
    subject = ((("title", "t" * 200),),)
    assert distinguished_name(subject) == "2.5.4.12=#0c81c8" + "74" * 200


def test_certificate_principal_is_the_mapped_name():
    subject = ((("organizationalUnitName", "ServiceUsers"),), (("commonName", "Duke"),))
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT")
    assert principal_from_certificate(subject, mapper) == KafkaPrincipal("User", "duke")
    assert principal_from_certificate(((("commonName", "x"),),), mapper) == KafkaPrincipal("User", "CN=x")
