"""The shortest useful graphrecall program: store a conversation, then recall from it."""

import tempfile

from graphrecall import Memory

with tempfile.TemporaryDirectory() as root, Memory.open(root) as memory:
    me = ("acme", "user-42")  # a scope: (organisation, user); each scope is its own database
    memory.add_session(
        me,
        [
            {"role": "user", "content": "I just adopted a beagle puppy and named him Biscuit."},
            {"role": "assistant", "content": "Congratulations! Beagles are friendly, curious dogs."},
            {"role": "user", "content": "We're moving from Chicago to Denver in April."},
            {"role": "assistant", "content": "Exciting! Denver has lots of dog-friendly trails."},
        ],
        session_id="2024-01-08",
        date="2024-01-08T19:00:00",
    )
    for hit in memory.search(me, "What is my dog called?", k=2):
        print(f"{hit.score:.3f}  {hit.date:%Y-%m-%d}  {hit.text.splitlines()[0]}")
    print(memory.context(me, "Where am I moving to?", token_budget=200).text)
