"""Consume one Ankusa queue message (a Kafka value, an SQS body, a RabbitMQ payload...):
decode it, redeem its claim check when the body was too large to be inline, then handle it.

    python consume_message.py message.json      # or: python consume_message.py < message.json
    ANKUSA_CLAIM_URL=http://127.0.0.1:4001 ANKUSA_CLAIM_TOKEN=...   # for claim messages

Exit status, as a consumer loop would act: 0 done (ack), 75 try again later (requeue with a
delay), 65 never (dead-letter: the same bytes fail the same way).
"""

import os
import sys

from ankusa import (
    LIFECYCLE_SOURCE,
    AnkusaError,
    ClaimClient,
    decode_message,
    idempotency_key,
    is_trusted,
    lifecycle_event_from,
    to_hook,
)


def main() -> int:
    data = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else sys.stdin.buffer.read()
    claims = ClaimClient(
        os.environ.get("ANKUSA_CLAIM_URL", "http://127.0.0.1:4001"),
        token=os.environ.get("ANKUSA_CLAIM_TOKEN"),
    )
    try:
        hook = to_hook(decode_message(data), claims)
        if hook.source_id == LIFECYCLE_SOURCE:
            event = lifecycle_event_from(hook)
            print(f"lifecycle {event.type} subject={event.subject} id={event.id}")
            return 0
    except AnkusaError as e:
        print(f"{type(e).__name__}: {e.code}", file=sys.stderr)
        return 75 if e.retryable else 65
    # Dedupe on this key; a replay gets a key of its own so that it is processed again.
    key = idempotency_key(hook, include_replay=True)
    print(f"hook {hook.id} key={key} trusted={is_trusted(hook)} bytes={len(hook.body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
