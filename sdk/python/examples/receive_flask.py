"""Receive Ankusa HTTP deliveries in a Flask app.

    pip install ankusa flask
    ANKUSA_WEBHOOK_SECRET=whsec_... PORT=8000 python receive_flask.py

Point the source's http sink at http://<this host>:8000/ankusa with the same secret
(a comma-separated list while rotating). The receiver reads the raw body, verifies the
signature and only then calls handle(); it answers 202, or 401/400 on a refusal, or 503
when handle() returns False (the gateway retries).
"""

import os

from flask import Flask

from ankusa import Delivery, idempotency_key, is_trusted
from ankusa.wsgi import ReceiverMiddleware

app = Flask(__name__)
processed = set()  # your database: remember what was handled, by idempotency key


@app.get("/health")
def health():
    return {"status": "ok"}


def handle(delivery: Delivery) -> bool:
    key = idempotency_key(delivery)
    if key in processed:
        return True  # a redelivery of a hook already handled
    if not is_trusted(delivery):
        # The gateway could not verify the provider's own signature: treat with care.
        print(f"untrusted {delivery.id}: {delivery.verification}", flush=True)
    processed.add(key)
    print(f"received {delivery.id} key={key} bytes={len(delivery.body)}", flush=True)
    return True


app.wsgi_app = ReceiverMiddleware(
    app.wsgi_app,
    handle,
    path="/ankusa",
    secrets=os.environ["ANKUSA_WEBHOOK_SECRET"].split(","),
)

if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
