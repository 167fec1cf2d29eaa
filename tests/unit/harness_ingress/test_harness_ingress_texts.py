"""Pure pieces of the webhook and pending-event modules: secret shape, URL, notice text (harness.md §4.4, §13)."""

from __future__ import annotations

import base64
import hashlib

from wakeful.harness.intake import secret_digest, secret_shape_ok
from wakeful.harness.pending import deadline_notice
from wakeful.harness.webhooks import new_secret, webhook_url


def test_new_secrets_are_43_url_safe_chars_of_256_random_bits_and_pass_the_shape_check() -> None:
    made = {new_secret() for _ in range(200)}
    assert len(made) == 200
    for secret in made:
        assert len(secret) == 43 and secret_shape_ok(secret)
        assert len(base64.urlsafe_b64decode(secret + "=")) == 32
        assert secret_digest(secret) == hashlib.sha256(secret.encode()).hexdigest()


def test_shape_check_refuses_everything_else() -> None:
    good = new_secret()
    for bad in (good[:-1], good + "a", good[:-1] + "=", good[:-1] + "+", good[:-1] + "/", good[:-1] + " ",
                good[:-1] + "\n", "", None, 43, good.encode()):
        assert not secret_shape_ok(bad)


def test_url_is_the_base_plus_path_or_the_path_alone() -> None:
    assert webhook_url("S", None) == "/v1/loop-webhooks/S"
    assert webhook_url("S", "") == "/v1/loop-webhooks/S"
    assert webhook_url("S", "https://h.example/") == "https://h.example/v1/loop-webhooks/S"
    assert webhook_url("S", "https://h.example/base") == "https://h.example/base/v1/loop-webhooks/S"


def test_deadline_notice_names_the_event_the_count_and_both_ways_out() -> None:
    text = deadline_notice("watch", "lp_1", "ev-9", 15, 3)
    for fact in ("'watch'", "lp_1", "'ev-9'", "15 minutes", "3 pending", "loop.resume", "discard", "failed"):
        assert fact in text
