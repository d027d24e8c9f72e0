"""The sample endpoint's signature check of docs/workers.md, in Python (standard library).

Run by callout's TestPythonSampleVerifies: reads the secret, timestamp, signature and body (hex)
from argv and prints "ok" or "bad".
"""
import hashlib
import hmac
import sys
import time


def verify(secret: bytes, headers, body: bytes, max_skew: int = 300) -> bool:
    ts = headers.get("Jobq-Timestamp", "")
    sig = headers.get("Jobq-Signature", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > max_skew or not sig.startswith("v1="):
        return False
    want = "v1=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(sig, want)


if __name__ == "__main__":
    secret, ts, sig, body = sys.argv[1].encode(), sys.argv[2], sys.argv[3], bytes.fromhex(sys.argv[4])
    print("ok" if verify(secret, {"Jobq-Timestamp": ts, "Jobq-Signature": sig}, body) else "bad")
