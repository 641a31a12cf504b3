"""The redaction rule (docs/how-to/remote.md, "What is redacted"), shape by shape:
each secret shape is replaced, each ordinary label is kept as is."""

from __future__ import annotations

import pytest

from durability.ground.redact import MARK, redact

HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
STRIPE = "4eC39HqLyjWDarjtT1zdp7dc"
SLACK = "https://hooks.slack.com/services/T0ABCDEF1/B0GHIJKL2/abcdefghijklmnopqrstuvwx"
TELEGRAM = "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage"

#: (text, what it must become): the secret ``hunter`` values go, the rest stays.
REDACTED = [
    ('curl -d {"password":"hunter3"} https://x.example/login',
     'curl -d {"password":"<redacted>"} https://x.example/login'),
    ("curl -d '{\"api_key\": \"hunter4\", \"user\": \"bob\"}' x",
     "curl -d '{\"api_key\": \"<redacted>\", \"user\": \"bob\"}' x"),
    ('curl -d "{\\"token\\":\\"hunter5\\"}" x', 'curl -d "{\\"token\\":\\"<redacted>\\"}" x'),
    ("mysql -u root -phunter2 db", "mysql -u root -p<redacted> db"),
    ("mysqldump -phunter2 --all-databases", "mysqldump -p<redacted> --all-databases"),
    ("docker login -u me -p hunter6 registry.example",
     "docker login -u me -p <redacted> registry.example"),
    ("docker login -p hunter6", "docker login -p <redacted>"),
    ("aws configure set aws_secret_access_key hunter7",
     "aws configure set aws_secret_access_key <redacted>"),
    (f"huggingface-cli login --token {HF}", "huggingface-cli login --token <redacted>"),
    (f"export X={HF}; run", "export X=<redacted>; run"),
    (f"echo {HF}", "echo <redacted>"),
    (f"curl -X POST {SLACK} -d hi", "curl -X POST https://hooks.slack.com/services/"
                                    "<redacted> -d hi"),
    (f"curl {TELEGRAM}", "curl https://api.telegram.org/bot<redacted>/sendMessage"),
    (f"stripe --api-key sk_live_{STRIPE}", "stripe --api-key <redacted>"),
    (f"echo sk_live_{STRIPE}", "echo <redacted>"),
    (f"echo rk_live_{STRIPE}", "echo <redacted>"),
    (f"echo sk_test_{STRIPE}", "echo <redacted>"),
    ("PASSWORD=1234 ./run", "PASSWORD=<redacted> ./run"),
    ("curl -H 'X-Api-Key: hunter8' x", "curl -H 'X-Api-Key: <redacted>' x"),
    ("GITHUB_TOKEN=abc make", "GITHUB_TOKEN=<redacted> make"),
    ("password: hunter.9 x", "password: <redacted> x"),
    ("aws_secret_access_key: hunterK7MDENG/bPxRfiCY", "aws_secret_access_key: <redacted>"),
]

#: Labels that hold no secret, kept whole.
KEPT = [
    "python run.py --max_tokens=4096",
    "max_tokens=4096",
    "token_limit: 4096",
    "llm --max-tokens 4096 prompt",
    "grep -rn api_key: config/",
    "grep -rn 'password:' src/",
    "grep -n token= ./settings.py",
    "grep -rn api_key: src/config/settings.yml",
    "grep -n password: settings.py",
    "mysql -p db",
    "mysql -u root -p",
    "ls -p src/",
    "docker login registry.example",
    "git commit -m 'fix login -p flag'",
    "Edit src/auth/token_store.py",
    "Write docs/password-reset.md",
    '{"max_tokens": 4096}',
    "curl https://hooks.slack.com/docs",
    "skip_live_tests=1",
]


@pytest.mark.parametrize(("text", "want"), REDACTED)
def test_a_secret_shape_is_redacted(text: str, want: str) -> None:
    assert redact(text) == want
    assert "hunter" not in redact(text) and MARK in redact(text)


@pytest.mark.parametrize("text", KEPT)
def test_an_ordinary_label_is_kept(text: str) -> None:
    assert redact(text) == text
