#!/usr/bin/env node
// ts-agent: a small Agent Client Protocol agent on the official TypeScript SDK
// (@agentclientprotocol/sdk), written for tend's protocol tests. It needs no
// network and no model: its answers are computed from the conversation, so a
// test can tell what the agent remembers. See ../README.md for the behaviour
// and the keywords a prompt can carry.
//
// It speaks ACP v1 on stdin/stdout, one JSON-RPC message a line; it writes a
// line to stderr for each request it handles, so a supervisor's log shows them.
//
// Sessions are kept on disk, one JSON file each, in $TS_AGENT_SESSIONS or else
// <the session's cwd>/.ts-agent-sessions, written after each change (a
// temporary file renamed over the old one), so a SIGKILLed agent started again
// can continue any session with session/load, which replays the history as
// session/update notifications before it answers, as the protocol says.

import * as acp from "@agentclientprotocol/sdk";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable, Writable } from "node:stream";

const VERSION = "1.0.0";

function log(msg) {
  process.stderr.write(`ts-agent[${process.pid}]: ${msg}\n`);
}

function sessionDir(cwd) {
  return process.env.TS_AGENT_SESSIONS || path.join(cwd || process.cwd(), ".ts-agent-sessions");
}

// A session id names a file, so only plain characters are accepted.
const idPattern = /^[A-Za-z0-9_-]{1,128}$/;

function sessionFile(cwd, id) {
  return path.join(sessionDir(cwd), `${id}.json`);
}

// save writes the session atomically: a reader (or the next run) sees the old
// file or the new one, never half of one.
function save(s) {
  const file = sessionFile(s.cwd, s.id);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify({ id: s.id, cwd: s.cwd, history: s.history }, null, 1));
  fs.renameSync(tmp, file);
}

// sessions holds the sessions this process has created or loaded, by id.
// Each is {id, cwd, history: [{role: "user"|"agent", text}], turn: null | {abort}}.
const sessions = new Map();

function getSession(id) {
  const s = sessions.get(id);
  if (!s) throw new acp.RequestError(-32002, `Resource not found: session ${id}`, { sessionId: id });
  return s;
}

function promptText(blocks) {
  return blocks
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join(" ")
    .trim();
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// memory is the answer that proves the agent remembers: the turn number and
// every earlier prompt of the session, in order.
function memory(history, text) {
  const before = history.filter((e) => e.role === "user").map((e) => e.text);
  const n = before.length + 1;
  const said = before.length === 0
    ? "nothing said before"
    : "you said before: " + before.map((t) => JSON.stringify(t)).join(", ");
  return `turn ${n}; ${said}; you say now: ${JSON.stringify(text)}.`;
}

const app = acp.agent({ name: "ts-agent" });

app.onRequest(acp.methods.agent.initialize, ({ params }) => {
  log(`initialize (client protocol ${params.protocolVersion})`);
  return {
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {
      loadSession: true,
      promptCapabilities: { image: false, audio: false, embeddedContext: false },
    },
    authMethods: [],
    agentInfo: { name: "tend-ts-agent", title: "tend's TypeScript-SDK test agent", version: VERSION },
  };
});

app.onRequest(acp.methods.agent.session.new, ({ params }) => {
  const s = { id: `ts-${randomUUID()}`, cwd: params.cwd, history: [], turn: null };
  save(s);
  sessions.set(s.id, s);
  log(`session/new ${s.id} in ${sessionDir(s.cwd)}`);
  return { sessionId: s.id };
});

app.onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
  const id = params.sessionId;
  if (!idPattern.test(id)) throw acp.RequestError.invalidParams({ sessionId: id }, "bad session id");
  let saved;
  try {
    saved = JSON.parse(fs.readFileSync(sessionFile(params.cwd, id), "utf8"));
  } catch (err) {
    throw new acp.RequestError(-32002, `Resource not found: session ${id} (${err.code || err.message})`, { sessionId: id });
  }
  const s = { id, cwd: params.cwd, history: saved.history || [], turn: null };
  sessions.set(id, s);
  // The protocol: the agent streams the whole conversation back as
  // session/update notifications, then answers the load.
  for (const e of s.history) {
    await client.notify(acp.methods.client.session.update, {
      sessionId: id,
      update: {
        sessionUpdate: e.role === "user" ? "user_message_chunk" : "agent_message_chunk",
        content: { type: "text", text: e.text },
      },
    });
  }
  log(`session/load ${id}: replayed ${s.history.length} messages`);
  return {};
});

app.onNotification(acp.methods.agent.session.cancel, ({ params }) => {
  const s = sessions.get(params.sessionId);
  log(`session/cancel ${params.sessionId}${s && s.turn ? "" : " (no turn under way)"}`);
  if (s && s.turn) s.turn.abort();
});

app.onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
  const s = getSession(params.sessionId);
  const text = promptText(params.prompt);
  const ctl = new AbortController();
  s.turn = ctl;
  const signal = ctl.signal;
  const update = (u) => client.notify(acp.methods.client.session.update, { sessionId: s.id, update: u });
  const say = (t) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t } });
  const words = /\b(\w+)\b/g;
  const has = (w) => [...text.toLowerCase().matchAll(words)].some((m) => m[1] === w);
  log(`session/prompt ${s.id}: ${JSON.stringify(text)}`);

  // The answer is computed before the prompt joins the history.
  const answer = memory(s.history, text);
  s.history.push({ role: "user", text });
  save(s);
  let told = "";
  const stream = async (t) => {
    for (const piece of t.match(/\S+\s*/g) || []) {
      if (signal.aborted) return;
      await say(piece);
      told += piece;
      if (has("slow")) await sleep(200, signal);
    }
  };
  const finish = (stopReason) => {
    if (told) s.history.push({ role: "agent", text: told.trim() });
    save(s);
    s.turn = null;
    log(`session/prompt ${s.id}: ${stopReason}`);
    return { stopReason };
  };

  try {
    if (has("plan")) {
      await update({
        sessionUpdate: "plan",
        entries: [
          { content: "Read the conversation", priority: "high", status: "completed" },
          { content: "Answer with what was said", priority: "medium", status: "in_progress" },
        ],
      });
    }
    await stream(answer + " ");
    if (has("crash")) {
      log("crash: exiting mid-turn as asked");
      process.exit(3);
    }
    if (has("tool")) {
      const toolCallId = `call-${randomUUID()}`;
      await update({ sessionUpdate: "tool_call", toolCallId, title: "Reading the session file", kind: "read", status: "in_progress" });
      await update({ sessionUpdate: "tool_call_update", toolCallId, status: "completed" });
      await stream("I read the session file. ");
    }
    if (has("permission")) {
      const toolCallId = `call-${randomUUID()}`;
      const toolCall = { toolCallId, title: "Writing notes.txt", kind: "edit", status: "pending" };
      await update({ sessionUpdate: "tool_call", ...toolCall });
      // A cancel ends the turn even if the client never answers the request;
      // the SDK tells the client with $/cancel_request.
      const cancelled = new Promise((resolve) => {
        if (signal.aborted) resolve({ outcome: { outcome: "cancelled" } });
        signal.addEventListener("abort", () => resolve({ outcome: { outcome: "cancelled" } }), { once: true });
      });
      const res = await Promise.race([
        client.request(acp.methods.client.session.requestPermission, {
          sessionId: s.id,
          toolCall: { toolCallId, title: toolCall.title, kind: "edit", status: "pending" },
          options: [
            { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
            { optionId: "reject-once", name: "Reject", kind: "reject_once" },
          ],
        }, { cancellationSignal: signal }).catch((err) => {
          if (signal.aborted) return { outcome: { outcome: "cancelled" } };
          throw err;
        }),
        cancelled,
      ]);
      const outcome = res.outcome;
      if (outcome.outcome === "cancelled" || signal.aborted) {
        await update({ sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
        return finish("cancelled");
      }
      const allowed = outcome.optionId === "allow-once";
      await update({ sessionUpdate: "tool_call_update", toolCallId, status: allowed ? "completed" : "failed" });
      await stream(allowed ? `Permission granted (${outcome.optionId}); I wrote notes.txt. ` : `Permission refused (${outcome.optionId}); I wrote nothing. `);
    }
    if (has("slow")) {
      for (let i = 1; i <= 50 && !signal.aborted; i++) await stream(`tick ${i}. `);
    }
    return finish(signal.aborted ? "cancelled" : "end_turn");
  } catch (err) {
    if (signal.aborted) return finish("cancelled");
    s.turn = null;
    throw err;
  }
});

const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
log(`started (ACP v${acp.PROTOCOL_VERSION}, sessions in ${process.env.TS_AGENT_SESSIONS || "<cwd>/.ts-agent-sessions"})`);
conn.closed.then(
  () => { log("stdin closed; exiting"); process.exit(0); },
  (err) => { log(`connection failed: ${err && err.message}`); process.exit(1); },
);
