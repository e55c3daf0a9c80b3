"""Channel secrets (an Apprise URL holds the webhook address or the mail password), kept
encrypted at rest with Fernet under a key derived from SECRET_KEY.

    token = encrypt(settings.secret_key, "json://hooks.example.com/x")
    decrypt(settings.secret_key, token)  # -> "json://hooks.example.com/x"

A new SECRET_KEY makes the saved secrets unreadable: the delivery log says so, and saving
each channel's address again fixes it.
"""

from __future__ import annotations

import base64
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.core.errors import UsageError

KEY_PURPOSE = b"sundial notification channel secrets"


class UnreadableSecret(UsageError):
    """The stored secret was encrypted under another SECRET_KEY (or was altered)."""


@cache
def _fernet(secret_key: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_PURPOSE).derive(
        secret_key.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(secret_key: str, text: str) -> str:
    return _fernet(secret_key).encrypt(text.encode()).decode()


def decrypt(secret_key: str, token: str) -> str:
    try:
        return _fernet(secret_key).decrypt(token.encode()).decode()
    except InvalidToken:
        raise UnreadableSecret(
            "The channel's saved address cannot be read: SECRET_KEY changed since it was "
            "saved. Edit the channel and enter its address again."
        ) from None
