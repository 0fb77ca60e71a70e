// Drives a live graphrecall server (tests/integration/test_typescript_client.py starts one on loopback and sets
// GRAPHRECALL_URL, GRAPHRECALL_KEY and GRAPHRECALL_ORG): store a session, find it, read the stored dates back
// with their offset, and get the API's errors as typed GraphRecallErrors.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  addSession,
  GraphRecall,
  GraphRecallError,
  getSession,
  type Hit,
  type IngestResult,
  search,
} from "../src/index.js";

const baseUrl = process.env.GRAPHRECALL_URL;
const apiKey = process.env.GRAPHRECALL_KEY;
const org = process.env.GRAPHRECALL_ORG ?? "acme";
if (!baseUrl || !apiKey) throw new Error("set GRAPHRECALL_URL and GRAPHRECALL_KEY to a running server and its key");
const path = { org, user: "ts-client" };
const said = 'We\'re moving to Zürich in September — my "new" office is near the lake.';

test("a session stored through the client is found by search", async () => {
  const memory = new GraphRecall({ baseUrl, apiKey });
  const stored: IngestResult = await memory.call(addSession, {
    path,
    body: {
      session_id: "move-1",
      date: "2024-03-02T18:30:00+01:00",
      messages: [
        { role: "user", content: said },
        { role: "assistant", content: "Congratulations! The lakeside is lovely in autumn." },
      ],
    },
  });
  assert.equal(stored.messages_added, 2);

  const found = await memory.call(search, { path, query: { query: "where is the user moving", k: 3 } });
  const top: Hit | undefined = found.hits[0];
  assert.ok(top, "search found nothing");
  assert.equal(top.session_id, "move-1");
  assert.match(top.text, /Zürich/);

  const session = await memory.call(getSession, { path: { ...path, session_id: "move-1" } });
  assert.equal(session.messages?.[0]?.content, said);
  assert.equal(session.started_at, "2024-03-02T17:30:00Z"); // stored as UTC, sent back with its offset
});

test("a wrong key is a GraphRecallError with the API's code", async () => {
  const memory = new GraphRecall({ baseUrl, apiKey: "gr_not-a-key" });
  await assert.rejects(
    memory.call(search, { path, query: { query: "anything" } }),
    (error: unknown) =>
      error instanceof GraphRecallError && error.status === 401 && error.code === "unauthorized",
  );
});

test("invalid input names the field", async () => {
  const memory = new GraphRecall({ baseUrl, apiKey });
  await assert.rejects(
    memory.call(search, { path, query: { query: "anything", k: 0 } }),
    (error: unknown) =>
      error instanceof GraphRecallError && error.status === 422 && error.code === "invalid_input" &&
      error.field === "k",
  );
});
