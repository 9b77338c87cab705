// The judging page: one pooled pair at a time, graded with the keys 0-3, every grade written by the
// server before the page moves on. What this tab did (its undo list, where it is) lives in the tab's
// sessionStorage, so a reload carries on where it was; what is judged lives in the server's file,
// read again every few seconds, so a second tab (or a colleague's) moves past what the other judged.
"use strict";

const store = window.sessionStorage;
const key = (pair) => pair.question + "\t" + pair.document;
const $ = (id) => document.getElementById(id);

let state = null; // {dataset, source, filter, pairs: [{question, document, hits, needed}], judgments}
let judgments = {}; // "question<TAB>document" -> {judgment: {grade, source, date} | null, proposals: [...]}
let shown = -1; // the pool index of the pair on screen
let shownJudged = false; // whether it was judged when it was put on screen
let busy = false;
const details = new Map();
let undo = JSON.parse(store.getItem("judging.undo") || "[]");
let history = JSON.parse(store.getItem("judging.history") || "[]");
let onlyNeeded = store.getItem("judging.needed") === "1";

function remember() {
  store.setItem("judging.undo", JSON.stringify(undo));
  store.setItem("judging.history", JSON.stringify(history.slice(-50)));
  store.setItem("judging.needed", onlyNeeded ? "1" : "0");
  store.setItem("judging.shown", String(shown));
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: {"Content-Type": "application/json", "X-Judging-Page": "1"},
    body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  let data;
  try {
    data = await response.json();
  } catch (error) {
    data = {error: "the server answered " + response.status + " without JSON"};
  }
  if (!response.ok) {
    const error = new Error(data.error || response.statusText);
    error.status = response.status;
    throw error;
  }
  return data;
}

function say(text, error = false) {
  const status = $("status");
  status.textContent = text;
  status.className = error ? "error" : "";
}

function visible() {
  const out = [];
  state.pairs.forEach((pair, i) => { if (!onlyNeeded || pair.needed) out.push(i); });
  return out;
}

function judgedAt(i) {
  const found = judgments[key(state.pairs[i])];
  return Boolean(found && found.judgment);
}

// The first unjudged pair after position `after` of the visible list, wrapping round (a skipped
// pair comes back once the others are done); -1 when every one is judged.
function nextUnjudged(after) {
  const order = visible();
  const start = order.indexOf(after);
  for (let step = 1; step <= order.length; step++) {
    const i = order[(start + step + order.length) % order.length];
    if (!judgedAt(i)) return i;
  }
  return -1;
}

function segmentsInto(element, segments) {
  element.replaceChildren();
  for (const [text, marked] of segments) {
    if (marked) {
      const mark = document.createElement("mark");
      mark.textContent = text;
      element.append(mark);
    } else {
      element.append(document.createTextNode(text));
    }
  }
}

function progress() {
  const order = visible();
  const judged = order.filter(judgedAt).length;
  $("count").textContent = judged + " of " + order.length + " judged";
  $("bar").max = Math.max(order.length, 1);
  $("bar").value = judged;
  $("needed-count").textContent = String(state.pairs.filter((p) => p.needed).length);
  const list = $("history");
  list.replaceChildren();
  for (const item of history.slice(-12).reverse()) {
    const li = document.createElement("li");
    li.textContent = item;
    list.append(li);
  }
  $("undo").disabled = busy || undo.length === 0;
}

async function show(i) {
  shown = i;
  remember();
  progress();
  if (i < 0) {
    $("pair").hidden = true;
    $("done").hidden = false;
    return;
  }
  $("done").hidden = true;
  shownJudged = judgedAt(i);
  let found = details.get(i);
  if (!found) {
    found = await api("/api/pair/" + i);
    details.set(i, found);
  }
  if (shown !== i) return; // another pair was asked for meanwhile
  const order = visible();
  $("question-id").textContent = found.question.id;
  $("question-type").textContent = found.question.type;
  $("position").textContent = (order.indexOf(i) + 1) + " of " + order.length;
  segmentsInto($("question-text"), found.question.segments);
  $("terms").textContent = found.question.terms.join(", ") || "none";
  const relevant = $("relevant");
  relevant.replaceChildren();
  for (const doc of found.relevant) {
    const li = document.createElement("li");
    const code = document.createElement("code");
    code.textContent = doc.id;
    li.append(code, document.createTextNode(" " + doc.title + " (grade " + doc.grade + ")"));
    relevant.append(li);
  }
  if (!found.relevant.length) relevant.textContent = "none at this relevant_grade";
  segmentsInto($("candidate-title"), found.candidate.title);
  $("candidate-id").textContent = found.candidate.id;
  $("hits").textContent = found.hits.map(([method, rank]) => method + " #" + rank).join(", ");
  segmentsInto($("candidate-text"), found.candidate.text);
  $("cut").hidden = !found.candidate.cut;
  $("cut").textContent = "(shown up to 20,000 of its " + found.candidate.length + " characters)";
  describeJudgments(i);
  $("pair").hidden = false;
}

function describeJudgments(i) {
  const found = judgments[key(state.pairs[i])] || {judgment: null, proposals: []};
  const current = found.judgment;
  $("current").textContent = current ? "judged " + current.grade + " by " + current.source + " on " + current.date : "not judged yet";
  $("proposal").textContent = found.proposals.map((p) => "llm:" + p.model + " proposes " + p.grade).join("; ");
  for (const button of document.querySelectorAll("button[data-grade]")) {
    button.classList.toggle("chosen", Boolean(current) && String(current.grade) === button.dataset.grade);
    button.disabled = busy;
  }
}

// The grade being saved: an undo typed meanwhile waits for it and undoes it, rather than being
// dropped because the page is busy (a judge who types 0 then u at once means that grade).
let saving = Promise.resolve();

async function grade(value) {
  if (busy || shown < 0) return;
  saving = saveGrade(value);
  await saving;
}

async function saveGrade(value) {
  const pair = state.pairs[shown];
  busy = true;
  describeJudgments(shown);
  say("saving " + pair.question + " / " + pair.document + ": " + value + "…");
  try {
    const answer = await api("/api/judge", {question: pair.question, document: pair.document, grade: value});
    judgments = answer.judgments;
    undo.push({question: pair.question, document: pair.document, written: answer.judgment, previous: answer.previous});
    history.push(pair.question + " / " + pair.document + ": " + value);
    say("saved " + pair.question + " / " + pair.document + ": " + value);
    busy = false;
    await show(nextUnjudged(shown));
  } catch (error) {
    busy = false;
    describeJudgments(shown);
    say("not saved: " + error.message, true);
  }
  progress();
}

async function undoLast() {
  if (busy) await saving;
  if (busy || !undo.length) return;
  const last = undo[undo.length - 1];
  busy = true;
  progress();
  try {
    const answer = await api("/api/undo", last);
    judgments = answer.judgments;
    undo.pop();
    history.push("undone " + last.question + " / " + last.document);
    say("undone " + last.question + " / " + last.document + (answer.restored ? ": back to " + answer.restored.grade : ": unjudged again"));
    busy = false;
    await show(state.pairs.findIndex((p) => p.question === last.question && p.document === last.document));
  } catch (error) {
    busy = false;
    if (error.status === 409) undo.pop(); // judged again since: that grade cannot be undone any more
    say("not undone: " + error.message, true);
  }
  remember();
  progress();
}

async function back() {
  const order = visible();
  const at = order.indexOf(shown);
  if (order.length) await show(order[(at - 1 + order.length) % order.length]);
}

async function refresh() {
  if (busy || !state) return;
  try {
    judgments = await api("/api/judgments");
  } catch (error) {
    say("cannot reach the judging server: " + error.message, true);
    return;
  }
  if (shown >= 0 && !shownJudged && judgedAt(shown)) {
    const pair = state.pairs[shown];
    say(pair.question + " / " + pair.document + " was judged meanwhile (another tab?)");
    await show(nextUnjudged(shown));
  } else if (shown >= 0) {
    describeJudgments(shown);
  } else {
    await show(nextUnjudged(-1));
  }
  progress();
}

document.addEventListener("keydown", (event) => {
  if (event.altKey || event.metaKey || (event.ctrlKey && event.key !== "z")) return;
  if (["0", "1", "2", "3"].includes(event.key)) grade(Number(event.key));
  else if (event.key === "u" || event.key === "Backspace" || (event.ctrlKey && event.key === "z")) undoLast();
  else if (event.key === "s" || event.key === "ArrowRight") { if (shown >= 0) show(nextUnjudged(shown)); }
  else if (event.key === "ArrowLeft") back();
  else return;
  event.preventDefault();
});

async function start() {
  state = await api("/api/state");
  judgments = state.judgments;
  $("dataset").textContent = state.dataset;
  $("who").textContent = "as " + state.source + " · " + state.file;
  const filter = $("needed");
  filter.disabled = !state.filter;
  filter.title = state.filter ? "" : "start the page with --baseline-ref REF: the pairs its comparison left undecided";
  onlyNeeded = onlyNeeded && state.filter;
  filter.checked = onlyNeeded;
  filter.addEventListener("change", () => {
    onlyNeeded = filter.checked;
    show(nextUnjudged(-1));
  });
  for (const button of document.querySelectorAll("button[data-grade]")) {
    button.addEventListener("click", () => grade(Number(button.dataset.grade)));
  }
  $("skip").addEventListener("click", () => { if (shown >= 0) show(nextUnjudged(shown)); });
  $("back").addEventListener("click", back);
  $("undo").addEventListener("click", undoLast);
  const last = Number(store.getItem("judging.shown") || "-1");
  const order = visible();
  // After a reload: the pair it was on if still unjudged, else the next one.
  await show(order.includes(last) && !judgedAt(last) ? last : nextUnjudged(order.includes(last) ? last : -1));
  window.addEventListener("focus", refresh);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  window.setInterval(refresh, 2000);
}

start().catch((error) => say("cannot start: " + error.message, true));
