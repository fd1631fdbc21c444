// The console's page: plain JavaScript (ES modules, fetch, template strings), no framework and
// no build step, so what the binary embeds is what runs. Two views, by the URL's hash:
// `#/` every namespace, `#/ns/NAME` one namespace. Every action goes through the console's
// API to the control plane, which authorizes and audits it; the page only greys out what the
// control plane said this identity may not do.

const view = document.getElementById("view");
const errorBox = document.getElementById("error");

const escape = (text) =>
  String(text ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const when = (micros) => (micros ? new Date(micros / 1000).toISOString().replace(".000", "") : "");

/** The API's answer as JSON; a refusal throws with the control plane's own words (or, from
 * something that is not the console's API, with what it said). */
async function api(path, options = {}) {
  const response = await fetch(`/api${path}`, {
    headers: { "content-type": "application/json" },
    ...options,
  });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text || response.statusText };
  }
  if (!response.ok) {
    throw new Error(`${body.code ?? response.status}: ${body.error ?? response.statusText}`);
  }
  return body;
}

function showError(error) {
  errorBox.textContent = error.message;
  errorBox.hidden = false;
}

function clearError() {
  errorBox.hidden = true;
  errorBox.textContent = "";
}

function pausesText(pauses) {
  return pauses
    .map((p) => `${p.destination || "all"} by ${p.paused_by}: ${p.reason}`)
    .join("; ");
}

async function listView() {
  const listed = await api("/namespaces");
  document.getElementById("control-plane").textContent = listed.control_plane;
  const rows = listed.namespaces
    .map(
      (n) => `<tr data-namespace="${escape(n.name)}">
        <td><a href="#/ns/${encodeURIComponent(n.name)}">${escape(n.name)}</a></td>
        <td>${n.version}</td><td>${escape(n.author)}</td><td>${when(n.changed_at_micros)}</td>
        <td>${n.pauses.length ? `<span class="badge paused">paused</span> ${escape(pausesText(n.pauses))}` : ""}</td>
      </tr>`,
    )
    .join("");
  view.innerHTML = `<h1>Namespaces</h1><section><table id="namespaces">
    <tr><th>namespace</th><th>version</th><th>changed by</th><th>changed at</th><th>pauses</th></tr>
    ${rows}</table></section>`;
}

function accessBadge(access) {
  if (access.admin) {
    const who = access.authorization ? escape(access.principal) : "anyone: authorization is off";
    return `<span id="access" class="badge admin">admin (${who})</span>`;
  }
  return `<span id="access" class="badge read-only">read-only: ${escape(access.principal || "no principal")} lacks access.admin</span>`;
}

function deadLettersSection(letters, admin) {
  const reasons = letters.reasons
    .map((r) => `<tr><td>${r.class}</td><td>${escape(r.reason)}</td><td>${r.entries}</td><td>${when(r.last_micros)}</td></tr>`)
    .join("");
  // The write's trace, where the console was given a trace URL and the write carried a context.
  const trace = (e) =>
    letters.trace_url && e.trace_id
      ? `<a class="trace" href="${escape(letters.trace_url.replaceAll("{trace_id}", e.trace_id))}" target="_blank" rel="noopener noreferrer">trace</a>`
      : "";
  const entries = letters.entries
    .map(
      (e) => `<tr data-entry="${escape(e.id)}"><td>${escape(e.id)}</td><td>${e.class}</td>
        <td>${escape(e.reason)}</td><td>${e.attempt}</td><td>${when(e.dead_lettered_at_micros)}</td>
        <td><button class="show" data-id="${escape(e.id)}" ${admin ? "" : "disabled title=\"payloads are the admins' to read\""}>payload</button></td>
        <td>${trace(e)}</td></tr>`,
    )
    .join("");
  return `<section><h2>Dead letters</h2>
    <p id="dead-letter-total">${letters.total} dead letter${letters.total === 1 ? "" : "s"}</p>
    <table><tr><th>class</th><th>reason</th><th>entries</th><th>last</th></tr>${reasons}</table>
    <table id="dead-letters"><tr><th>entry</th><th>class</th><th>reason</th><th>attempts</th><th>dead-lettered</th><th></th><th></th></tr>${entries}</table>
    <pre id="payload" hidden></pre>
    <p><button id="redrive" ${admin ? "" : "disabled title=\"redriving needs access.admin\""}>Redrive…</button>
    <span id="redrive-state"></span></p>
    <div id="confirmation-slot"></div></section>`;
}

/** Pauses with a resume each, a pause and a cancel by entry id; each asks the control plane,
 * which refuses what this identity may not do, in its own words. */
function deliverySection(ns) {
  const off = (what) => (ns.access.admin ? "" : `disabled title="${what} needs access.admin"`);
  const rows = ns.pauses
    .map(
      (p) => `<tr><td>${escape(p.destination || "all destinations")}</td><td>${escape(p.paused_by)}</td>
        <td>${when(p.paused_at_micros)}</td><td>${escape(p.reason)}</td>
        <td><button class="resume" data-destination="${escape(p.destination)}" ${off("resuming")}>resume</button></td></tr>`,
    )
    .join("");
  return `<section><h2>Delivery</h2>
    <p id="pauses">${ns.pauses.length ? `<span class="badge paused">paused</span> ${escape(pausesText(ns.pauses))}` : "nothing is paused"}</p>
    ${ns.pauses.length ? `<table id="pause-table"><tr><th>destination</th><th>by</th><th>at</th><th>reason</th><th></th></tr>${rows}</table>` : ""}
    <p><label>Destination <input id="pause-destination" placeholder="all" size="16"></label>
      <label>Reason <input id="pause-reason" size="30"></label>
      <button id="pause" ${off("pausing")}>Pause</button></p>
    <p><label>Entry id <input id="cancel-id" size="38"></label>
      <label>Reason <input id="cancel-reason" size="30"></label>
      <button id="cancel" ${off("cancelling")}>Cancel entry</button></p>
    <p id="delivery-result"></p></section>`;
}

/** Where each destination stands, as the brokers show its reader (or why it was not read). */
function destinationsSection(destinations) {
  if (destinations.error) {
    return `<section><h2>Destinations</h2><p id="destinations-error" class="error">not read: ${escape(destinations.error)}</p></section>`;
  }
  const rows = destinations
    .map(
      (d) => `<tr data-destination="${escape(d.name)}"><td>${escape(d.name)}</td><td>${escape(d.kind)}</td>
        <td class="state">${d.paused ? `<span class="badge paused">paused</span> by ${escape(d.paused.paused_by)}: ${escape(d.paused.reason)}` : escape(d.state)}</td>
        <td class="lag">${d.lag_entries}</td><td>${d.lag_seconds.toFixed(1)}</td><td>${when(d.last_applied_micros)}</td>
        <td>${d.dead_lettered}</td><td>${d.lost ? `${d.lost}: ${escape(d.gaps.join(" "))}` : ""}</td></tr>`,
    )
    .join("");
  return `<section><h2>Destinations</h2>
    <table id="destinations"><tr><th>destination</th><th>kind</th><th>state</th><th>lag</th><th>lag seconds</th>
    <th>last applied</th><th>dead letters</th><th>lost</th></tr>${rows}</table></section>`;
}

/** What each consumer given to the console (--consumers) showed at its last read: counts and
 * rates per destination of this namespace, and its open breakers (they hold entries of every
 * namespace delivering to that endpoint). */
function consumersSection(consumers) {
  if (consumers.error) {
    return `<section><h2>Consumers</h2><p class="error">not read: ${escape(consumers.error)}</p></section>`;
  }
  if (!consumers.length) {
    return `<section><h2>Consumers</h2><p id="consumers">no consumer metrics given (wal-console --consumers)</p></section>`;
  }
  const rate = (n) => (n == null ? "" : ` (${n.toFixed(1)}/s)`);
  const consumer = (c) => {
    if (!c.destinations) {
      return `<h3>${escape(c.address)}</h3><p class="error">${escape(c.error ?? "not read yet")}</p>`;
    }
    const rows = c.destinations
      .map(
        (d) => `<tr data-destination="${escape(d.name)}"><td>${escape(d.name)}</td>
          <td class="delivered">${d.delivered}${rate(d.delivered_per_second)}</td>
          <td>${d.retried}${rate(d.retried_per_second)}</td><td>${d.dead_lettered}${rate(d.dead_lettered_per_second)}</td>
          <td>${d.in_flight}</td><td>${d.held}</td><td>${d.backlog}</td></tr>`,
      )
      .join("");
    const breakers = c.breakers
      .map((b) => `<li><span class="badge paused">open</span> ${escape(b.endpoint)} since ${when(b.opened_at_micros)}, holding ${b.held}</li>`)
      .join("");
    return `<h3>${escape(c.address)}</h3>
      ${c.error ? `<p class="error">last read failed: ${escape(c.error)}; showing the read of ${when(c.read_at_micros)}</p>` : ""}
      <table class="consumer" data-address="${escape(c.address)}"><tr><th>destination</th><th>delivered</th><th>retried</th>
      <th>dead-lettered</th><th>in flight</th><th>held</th><th>backlog</th></tr>${rows}</table>
      <ul class="breakers">${breakers || "<li>no open breakers</li>"}</ul>`;
  };
  return `<section id="consumers"><h2>Consumers</h2>${consumers.map(consumer).join("")}</section>`;
}

const field = (id) => document.getElementById(id).value;

/** One delivery action: the call, the page drawn again, and the answer shown under it. */
async function deliveryAction(name, path, action, body, said) {
  const answer = await api(`${path}/${action}`, { method: "POST", body: JSON.stringify(body) });
  await namespaceView(name);
  document.getElementById("delivery-result").textContent = said(answer);
}

function wireDelivery(name, path) {
  const pause = document.getElementById("pause");
  pause.addEventListener("click", () =>
    busy(pause, () =>
      deliveryAction(name, path, "pause", { destination: field("pause-destination"), reason: field("pause-reason") },
        (a) => a.changed ? `paused ${a.pause.destination || "every destination"}` : `already paused by ${a.pause.paused_by}: ${a.pause.reason}`),
    ),
  );
  for (const button of view.querySelectorAll("button.resume")) {
    const destination = button.dataset.destination;
    button.addEventListener("click", () =>
      busy(button, () =>
        deliveryAction(name, path, "resume", { destination },
          (a) => (a.changed ? `resumed ${destination || "every destination"}` : "it was not paused")),
      ),
    );
  }
  const cancel = document.getElementById("cancel");
  cancel.addEventListener("click", () =>
    busy(cancel, () =>
      deliveryAction(name, path, "cancel", { entry_id: field("cancel-id"), reason: field("cancel-reason") },
        (a) => a.summary),
    ),
  );
}

function transactionsSection(txns, admin) {
  if (!txns) return "";
  if (txns.error) {
    return `<section><h2>Transactions</h2><p id="transaction-counts" class="error">not read: ${escape(txns.error)}</p></section>`;
  }
  const count = (list) => (list.length >= txns.limit ? `${list.length}+` : `${list.length}`);
  const row = (t, abortable) => `<tr data-transaction="${escape(t.id)}"><td>${escape(t.id)}</td><td>${escape(t.state)}</td>
    <td>${t.item_count == null ? "-" : `${t.applied_through} of ${t.item_count}`}</td>
    <td>${when(t.opened_at_micros)}</td><td>${when(t.committed_at_micros)}</td><td>${escape(t.reason)}</td>
    <td>${abortable ? `<button class="abort" data-id="${escape(t.id)}" ${admin ? "" : "disabled title=\"aborting needs access.admin\""}>abort…</button>` : ""}</td></tr>`;
  const rows = [
    ...txns.open.map((t) => row(t, true)),
    ...txns.applying.map((t) => row(t, false)),
    ...txns.dead_lettered.map((t) => row(t, false)),
  ].join("");
  return `<section><h2>Transactions</h2>
    <p id="transaction-counts">${count(txns.open)} open, ${count(txns.applying)} applying, ${count(txns.dead_lettered)} dead-lettered</p>
    <table id="transactions"><tr><th>transaction</th><th>state</th><th>applied</th><th>opened</th><th>committed</th><th>reason</th><th></th></tr>${rows}</table>
    <p id="abort-result"></p><div id="abort-slot"></div></section>`;
}

/** Asks for a reason and a confirmation before an abort; nothing changes until then. */
function confirmAbort(name, path, id) {
  clearError();
  const slot = document.getElementById("abort-slot");
  slot.innerHTML = `<section id="abort-confirmation">
    <p>Abort transaction <strong>${escape(id)}</strong>? Its staged items are dropped, and its client's next append or commit is refused.</p>
    <label>Reason <input id="abort-reason" size="40"></label>
    <button id="confirm-abort">Abort</button> <button id="dismiss-abort">Cancel</button></section>`;
  document.getElementById("dismiss-abort").addEventListener("click", () => (slot.innerHTML = ""));
  const confirm = document.getElementById("confirm-abort");
  confirm.addEventListener("click", () =>
    busy(confirm, async () => {
      const reason = document.getElementById("abort-reason").value;
      const aborted = await api(`${path}/transactions/${encodeURIComponent(id)}/abort`, {
        method: "POST",
        body: JSON.stringify({ reason }),
      });
      await namespaceView(name);
      document.getElementById("abort-result").textContent = aborted.summary;
    }),
  );
}

function redriveText(redrive) {
  if (!redrive) return "";
  const left = Object.entries(redrive.left).map(([why, n]) => `${n} ${why}`).join(", ");
  const error = redrive.error ? ` (${redrive.error})` : "";
  const [what, done] = redrive.replay ? ["replay", "replayed"] : ["redrive", "redriven"];
  return `last ${what}: ${redrive.state}${error}, ${redrive.redriven} ${done} by ${redrive.started_by} at ${when(redrive.started_at_micros)}${left ? `; left: ${left}` : ""}`;
}

async function namespaceView(name) {
  const path = `/namespaces/${encodeURIComponent(name)}`;
  const [ns, letters, redrive, txns, destinations, consumers] = await Promise.all([
    api(path),
    api(`${path}/dead-letters`),
    api(`${path}/redrive`),
    // Its own failure (the namespace's CQL cluster out of reach) stays in its section.
    api(`${path}/transactions`).catch((error) => ({ error: error.message })),
    api(`${path}/destinations`).catch((error) => ({ error: error.message })),
    api(`${path}/consumers`).catch((error) => ({ error: error.message })),
  ]);
  const history = ns.history
    .map((v) => `<tr><td>${v.version}</td><td>${escape(v.author)}</td><td>${when(v.at_micros)}</td><td>${escape(v.changes.join(", "))}</td></tr>`)
    .join("");
  view.innerHTML = `<h1>${escape(ns.name)} ${accessBadge(ns.access)}</h1>
    ${destinationsSection(destinations)}
    ${consumersSection(consumers)}
    ${deliverySection(ns)}
    ${deadLettersSection(letters, ns.access.admin)}
    ${transactionsSection(txns, ns.access.admin)}
    <section><h2>Config, version ${ns.version}</h2><pre id="config">${escape(JSON.stringify(ns.config, null, 2))}</pre>
    <table id="history"><tr><th>version</th><th>by</th><th>at</th><th>changed</th></tr>${history}</table></section>`;
  document.getElementById("redrive-state").textContent = redriveText(redrive);
  const redriveButton = document.getElementById("redrive");
  redriveButton.addEventListener("click", () => busy(redriveButton, () => confirmRedrive(path)));
  for (const button of view.querySelectorAll("button.show")) {
    button.addEventListener("click", () => busy(button, () => showPayload(path, button.dataset.id)));
  }
  wireDelivery(name, path);
  for (const button of view.querySelectorAll("button.abort")) {
    button.addEventListener("click", () => confirmAbort(name, path, button.dataset.id));
  }
}

/** Runs a click's work with its button disabled meanwhile (one call at a time), errors shown. */
async function busy(button, work) {
  button.disabled = true;
  try {
    await run(work);
  } finally {
    button.disabled = false;
  }
}

async function showPayload(path, id) {
  const shown = await api(`${path}/dead-letters/${encodeURIComponent(id)}`);
  const box = document.getElementById("payload");
  box.textContent = shown.copies.map((c) => `${c.dlq} ${c.position}\n${c.payload ?? ""}`).join("\n\n");
  box.hidden = false;
}

/** The dry run first; nothing moves until the operator confirms what it found. */
async function confirmRedrive(path) {
  clearError();
  const dry = await api(`${path}/redrive`, { method: "POST", body: JSON.stringify({ dry_run: true }) });
  const count = dry.left["would be redriven"] ?? 0;
  const kept = Object.entries(dry.left).filter(([why]) => why !== "would be redriven");
  const slot = document.getElementById("confirmation-slot");
  slot.innerHTML = `<section id="confirmation">
    <p id="dry-run">The dry run found <strong>${count}</strong> dead letter${count === 1 ? "" : "s"} to redrive${kept.length ? ` (staying: ${escape(kept.map(([why, n]) => `${n} ${why}`).join(", "))})` : ""}.
    Redrive ${count === 1 ? "it" : "them"} now, at 50 a second at most?</p>
    <button id="confirm" ${count ? "" : "disabled"}>Redrive</button> <button id="dismiss">Cancel</button>
    <small>(it takes what the DLQs hold when it starts: more, if more arrived since the dry run)</small></section>`;
  document.getElementById("dismiss").addEventListener("click", () => (slot.innerHTML = ""));
  document.getElementById("confirm").addEventListener("click", async () => {
    slot.innerHTML = "";
    await run(async () => {
      const redrive = await api(`${path}/redrive`, { method: "POST", body: JSON.stringify({ dry_run: false }) });
      await follow(path, redrive);
    });
  });
}

/** A control plane reports a running redrive every 2 s; one silent for this long has stopped
 * (its control plane died), and the next redrive on any control plane takes it over. */
const SILENT_MS = 30000;

/** Shows the redrive's progress until it ends, goes silent, or the page moves elsewhere. */
async function follow(path, redrive) {
  const state = document.getElementById("redrive-state");
  while (redrive && redrive.state === "running" && state.isConnected) {
    if (Date.now() - redrive.updated_at_micros / 1000 > SILENT_MS) {
      const again = redrive.replay ? "the same walctl replay again continues it" : "Redrive again continues it";
      state.textContent = `${redriveText(redrive)}; not reporting for 30 s: ${again}`;
      return;
    }
    state.textContent = redriveText(redrive);
    await new Promise((done) => setTimeout(done, 1000));
    redrive = await api(`${path}/redrive`);
  }
  state.textContent = redriveText(redrive);
}

async function run(work) {
  try {
    await work();
  } catch (error) {
    showError(error);
  }
}

async function route() {
  clearError();
  const match = location.hash.match(/^#\/ns\/(.+)$/);
  await run(() => (match ? namespaceView(decodeURIComponent(match[1])) : listView()));
}

window.addEventListener("hashchange", route);
route();
