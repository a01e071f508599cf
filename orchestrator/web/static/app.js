// Enhancements only: every form works without this file.
"use strict";

function timeLeft(deadline) {
  let s = Math.ceil((Date.parse(deadline) - Date.now()) / 1000);
  if (isNaN(s)) return "";
  if (s <= 0) return "passed";
  const d = Math.floor(s / 86400); s -= d * 86400;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return d + " d " + h + " h";
  if (h) return h + " h " + m + " min";
  if (m) return m + " min " + s + " s";
  return s + " s";
}

function ago(when) {
  const s = Math.round((Date.now() - Date.parse(when)) / 1000);
  if (isNaN(s)) return null;
  const a = Math.abs(s);
  if (a < 10) return "just now";
  let text = a + " s";
  if (a >= 86400) text = Math.floor(a / 86400) + " d";
  else if (a >= 3600) text = Math.floor(a / 3600) + " h";
  else if (a >= 60) text = Math.floor(a / 60) + " min";
  return s >= 0 ? text + " ago" : "in " + text;
}

// The server writes times in UTC (the moment in the title); shown here in the reader's zone.
function localise(el) {
  const when = new Date(el.getAttribute("datetime"));
  if (isNaN(when.getTime())) return;
  el.title = when.toLocaleString();
  if (el.classList.contains("clock")) el.textContent = when.toLocaleTimeString();
}

function tick() {
  document.querySelectorAll("time.countdown").forEach(function (el) {
    el.textContent = timeLeft(el.getAttribute("datetime"));
  });
  document.querySelectorAll("time.ago").forEach(function (el) {
    const text = ago(el.getAttribute("datetime"));
    if (text) el.textContent = text;
  });
}

function follow(section) {
  const id = section.dataset.session;
  const after = section.dataset.after || "0";
  const timeline = document.getElementById("timeline");
  const status = document.getElementById("status");
  const source = new EventSource("/sessions/" + encodeURIComponent(id) + "/live?after=" + after);
  source.addEventListener("log", function (msg) {
    const e = JSON.parse(msg.data);
    const li = document.createElement("li");
    li.className = "event new kind-" + e.kind;
    li.dataset.id = e.id;
    const t = document.createElement("time");
    t.className = "clock";
    t.setAttribute("datetime", e.time || "");
    t.textContent = (e.time || "").slice(11, 19);
    localise(t);
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = e.text;  // textContent: an agent's text never becomes markup
    li.append(t, " ", text);
    timeline.appendChild(li);
  });
  source.addEventListener("status", function (msg) {
    const s = JSON.parse(msg.data).status;
    status.textContent = s;
    status.className = "badge status-" + s;
  });
  source.addEventListener("end", function () {
    source.close();
    window.location.reload();
  });
}

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("time.clock, time.ago").forEach(localise);
  tick();
  setInterval(tick, 1000);
  document.querySelectorAll("input.other-text").forEach(function (input) {
    input.addEventListener("input", function () {
      const box = input.parentElement.querySelector("input[value='__other__']");
      if (box && input.value.trim()) box.checked = true;
    });
  });
  const section = document.getElementById("session");
  if (section && section.dataset.status === "running") follow(section);
});
