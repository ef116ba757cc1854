"""Receive Ankusa HTTP deliveries in a FastAPI (ASGI) app.

    pip install ankusa fastapi uvicorn
    ANKUSA_WEBHOOK_SECRET=whsec_... PORT=8000 python receive_fastapi.py

Point the source's http sink at http://<this host>:8000/ankusa with the same secret
(a comma-separated list while rotating). The receiver reads the raw body and verifies it
before handle() runs; an async handler is awaited, a plain one runs in a thread.
"""

import os

import uvicorn
from fastapi import FastAPI

from ankusa import Delivery, idempotency_key, is_trusted
from ankusa.asgi import ReceiverMiddleware

app = FastAPI()
processed = set()  # your database: remember what was handled, by idempotency key


@app.get("/health")
async def health():
    return {"status": "ok"}


async def handle(delivery: Delivery) -> bool:
    key = idempotency_key(delivery)
    if key in processed:
        return True  # a redelivery of a hook already handled
    processed.add(key)
    print(f"received {delivery.id} key={key} trusted={is_trusted(delivery)}", flush=True)
    return True  # False answers 503: the gateway delivers it again later


app.add_middleware(
    ReceiverMiddleware,
    handler=handle,
    path="/ankusa",
    secrets=os.environ["ANKUSA_WEBHOOK_SECRET"].split(","),
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")), log_level="warning")
