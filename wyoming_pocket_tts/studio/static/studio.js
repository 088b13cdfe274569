// The voice studio's page: everything it does goes through the documented HTTP API,
// with relative URLs so that it works under Home Assistant's ingress path prefix.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { status: null, recorded: null };

async function api(path, options = {}) {
  const response = await fetch(path, options);
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try { message = (await response.json()).error || message; } catch (_) { /* not JSON */ }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response.status === 204 ? null : response.json();
}

function say(id, text, isError = false) {
  const element = $(id);
  element.textContent = text;
  element.classList.toggle("error", isError);
}

function element(tag, properties = {}, ...children) {
  const { dataset = {}, ...rest } = properties;
  const node = Object.assign(document.createElement(tag), rest);
  Object.assign(node.dataset, dataset);
  node.append(...children);
  return node;
}

// -- status ---------------------------------------------------------------------------

async function refreshStatus() {
  showStatus(await api("api/status"));
}

function showStatus(status) {
  state.status = status;
  $("model-line").textContent = modelLine(status);
  const cloning = $("cloning-note");
  cloning.hidden = status.voice_cloning.available;
  cloning.textContent = status.voice_cloning.reason || "";
  const folder = $("folder-note");
  folder.hidden = status.voices_folder !== null;
  folder.textContent = "This server has no voices folder: start it with --voices-dir FOLDER to add voices.";
  const canAdd = status.voices_folder !== null;
  $("add-button").disabled = !canAdd;
  $("record").disabled = !canAdd || !status.voice_cloning.available;
  status.languages.forEach(showLanguage);
  showLanguageChoice(status.languages);
  applyLimits(status.limits);
  renderRecent(status.recent_requests);
}

function modelLine(status) {
  const model = status.model;
  const int8 = model.quantized ? ", int8" : "";
  if (status.languages.length === 1) {
    return `Model ${model.name} (${model.languages.join(", ")}${int8}) · ` +
      `version ${status.version} · default voice ${status.default_voice}`;
  }
  const first = status.languages.find((language) => language.default);
  return `${status.languages.length} languages, by default ${first.name}${int8} · ` +
    `version ${status.version} · default voice ${status.default_voice}`;
}

// Each served language's group of voices, made once (its sentence keeps what the user
// wrote), its line about the model brought up to date.
function languageGroup(language) {
  const found = document.querySelector(`.language[data-language="${language.code}"]`);
  if (found) return found;
  const text = element("textarea", {
    id: `preview-text-${language.code}`, className: "preview-text", rows: 2, lang: language.code,
    value: language.sample_text,
  });
  const group = element("section", { className: "language", dataset: { language: language.code } },
    element("h3", {}, element("span", { textContent: language.name }), " ",
      element("span", { className: "about muted" })),
    element("label", { htmlFor: text.id, textContent: "Sentence to preview" }), text,
    element("ul", { className: "voices" }),
  );
  $("languages").append(group);
  return group;
}

function showLanguage(language) {
  const model = `model ${language.model} · ` + (language.loaded ? "loaded" : "loads when first used");
  languageGroup(language).querySelector(".about").textContent =
    language.default ? `${model} · the default language` : model;
}

// Which language a new voice is for: the default one unless the user picks another.
function showLanguageChoice(languages) {
  const select = $("add-language");
  const codes = languages.map((language) => language.code).join();
  if (select.dataset.codes !== codes) {
    select.replaceChildren(...languages.map((language) => element("option", {
      value: language.code, textContent: `${language.name} (${language.code})`,
      defaultSelected: language.default, selected: language.default,
    })));
    select.dataset.codes = codes;
  }
  $("add-language-field").hidden = languages.length < 2;
}

// The page checks what the server checks, with the server's numbers.
function applyLimits(limits) {
  document.querySelectorAll(".preview-text").forEach((text) => { text.maxLength = limits.preview_chars; });
  $("add-name").pattern = limits.name_pattern;
  $("add-name").title = `The name: ${limits.name_rule}.`;
  $("speech-advice").textContent = speechAdvice(limits);
}

// How long to speak, e.g. "5 to 30 s".
function speechAdvice(limits) {
  const [shortest, longest] = limits.recommended_seconds;
  return `${shortest} to ${longest} s`;
}

function renderRecent(records) {
  const rows = records.map((r) => element("tr", {},
    element("td", { textContent: new Date(r.finished_at * 1000).toLocaleTimeString() }),
    element("td", { textContent: r.kind }),
    element("td", { textContent: r.voice }),
    element("td", { textContent: String(r.chars) }),
    element("td", { textContent: r.first_audio_seconds === null ? "–" : `${Math.round(r.first_audio_seconds * 1000)} ms` }),
    element("td", { textContent: r.speed === null ? "–" : `${r.speed.toFixed(1)}× real time` }),
  ));
  $("recent").replaceChildren(...rows);
}

// -- voices ---------------------------------------------------------------------------

function showVoices(voices) {
  for (const group of document.querySelectorAll(".language")) {
    const own = voices.filter((voice) => voice.language === group.dataset.language);
    group.querySelector(".voices").replaceChildren(...own.map(voiceCard));
  }
}

function voiceCard(voice) {
  const quoted = encodeURIComponent(voice.name);
  const badges = [element("span", { className: "badge", textContent: voice.kind })];
  if (voice.default) badges.push(element("span", { className: "badge default", textContent: "default" }));
  if (voice.loaded) badges.push(element("span", { className: "badge loaded", textContent: "loaded" }));
  const preview = element("button", { type: "button", className: "primary", textContent: "▶ Preview" });
  preview.addEventListener("click", () => playPreview(voice));
  const exported = element("a", { href: `api/voices/${quoted}/export`, download: `${voice.name}.safetensors`, textContent: "Export" });
  const actions = [preview, exported];
  if (voice.editable) {
    const rename = element("button", { type: "button", textContent: "Rename" });
    rename.addEventListener("click", () => renameVoice(voice.name));
    const remove = element("button", { type: "button", textContent: "Delete" });
    remove.addEventListener("click", () => deleteVoice(voice.name));
    actions.push(rename, remove);
  }
  return element("li", { className: "voice", dataset: { voice: voice.name, language: voice.language } },
    element("div", { className: "title" }, element("span", { className: "name", textContent: voice.name }), ...badges),
    element("div", { className: "description", textContent: voice.description }),
    speedControl(voice),
    element("div", { className: "actions" }, ...actions),
  );
}

// The voice's own speaking rate, in the server's range, saved as soon as it is let go;
// without one it speaks at the server's. The server keeps it in the voices folder.
function speedControl(voice) {
  const status = state.status;
  const [slowest, fastest] = status.limits.speed;
  const id = `speed-${voice.name}`;
  const slider = element("input", {
    id, type: "range", className: "speed-input", min: slowest, max: fastest, step: 0.05,
    value: voice.speed ?? status.speed, disabled: status.voices_folder === null,
    title: status.voices_folder === null ? "Keeping a voice's speed needs a voices folder (--voices-dir)." : "",
  });
  const shown = element("output", { htmlFor: id, className: "speed-value" });
  const showValue = (own) => {
    shown.textContent = `${Number(slider.value).toFixed(2)}×` + (own ? "" : " (server's)");
  };
  showValue(voice.speed !== null);
  const reset = element("button", { type: "button", textContent: "Reset", disabled: voice.speed === null });
  slider.addEventListener("input", () => showValue(true));
  slider.addEventListener("change", () => saveSpeed(voice.name, Number(slider.value)));
  reset.addEventListener("click", () => saveSpeed(voice.name, null));
  return element("div", { className: "speed" },
    element("div", { className: "speed-line" }, element("label", { htmlFor: id, textContent: "Speed" }), shown),
    slider, reset);
}

async function saveSpeed(name, speed) {
  try {
    await api(`api/voices/${encodeURIComponent(name)}`, {
      method: "PATCH", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ speed }),
    });
    say("voices-message", speed === null ? `${name} speaks at the server's speed.` : `${name} speaks at ${speed}×.`);
  } catch (error) { say("voices-message", error.message, true); }
  await refreshAll();
}

// A voice speaks its own language's sentence, with its own language's model.
function playPreview(voice) {
  const text = $(`preview-text-${voice.language}`).value.trim();
  if (!text) { say("voices-message", "Write a sentence to preview first.", true); return; }
  const player = $("player");
  const name = voice.name;
  say("voices-message", `${name} is speaking…`);
  player.src = `api/voices/${encodeURIComponent(name)}/preview?text=${encodeURIComponent(text)}`;
  player.dataset.voice = name;
  player.play().catch((error) => say("voices-message", `Cannot play: ${error.message}`, true));
}

async function renameVoice(name) {
  const newName = prompt(`New name for ${name}:`, name);
  if (!newName || newName === name) return;
  try {
    await api(`api/voices/${encodeURIComponent(name)}`, {
      method: "PATCH", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: newName }),
    });
    say("voices-message", `${name} is now called ${newName}.`);
  } catch (error) { say("voices-message", error.message, true); }
  await refreshAll();
}

async function deleteVoice(name) {
  if (!confirm(`Delete the voice ${name}? Its files are removed from the voices folder.`)) return;
  try {
    await api(`api/voices/${encodeURIComponent(name)}`, { method: "DELETE" });
    say("voices-message", `${name} was deleted.`);
  } catch (error) { say("voices-message", error.message, true); }
  await refreshAll();
}

// -- adding -----------------------------------------------------------------------------

function suggestName(fileName) {
  const stem = fileName.replace(/\.[^.]*$/, "").toLowerCase();
  return stem.replace(/[^a-z0-9]+/g, "_").replace(/^_+|_+$/g, "").slice(0, 40) || "voice";
}

async function upload(blob, fileName) {
  const form = new FormData();
  form.append("file", blob, fileName);
  const name = $("add-name").value.trim();
  if (name) form.append("name", name);
  const language = $("add-language").value;
  if (language) form.append("language", language);
  return api("api/voices", { method: "POST", body: form });
}

async function addVoice(event) {
  event.preventDefault();
  const file = state.recorded || $("add-file").files[0];
  if (!file) { say("add-message", "Choose a file or record first.", true); return; }
  const limits = state.status.limits;
  if (file.size > limits.upload_bytes) {
    say("add-message", `The file is over the limit of ${Math.floor(limits.upload_bytes / 2 ** 20)} MB.`, true);
    return;
  }
  const fileName = file.name || "recording.wav";
  $("add-button").disabled = true;
  say("add-message", "Checking and encoding the voice (this takes a few seconds)…");
  try {
    let voice;
    try {
      voice = await upload(file, fileName);
    } catch (error) {
      // A format the server cannot decode (M4A, WebM without ffmpeg): the browser may.
      if (error.status !== 415 || fileName.endsWith(".safetensors")) throw error;
      const wav = await toWav(file, limits.decoded_seconds);
      voice = await upload(wav, fileName.replace(/\.[^.]*$/, "") + ".wav");
    }
    // A voice file whose speed was not one is added all the same: the server says so.
    say("add-message", voice.warning ? `Added ${voice.name}. ${voice.warning}` : `Added ${voice.name}.`);
    state.recorded = null;
    const language = $("add-language").value;
    $("add-form").reset();
    $("add-language").value = language;  // the next voice is likely of the same language
    $("record-state").textContent = "";
    await refreshAll();
    playPreview(voice);
  } catch (error) {
    say("add-message", error.message, true);
  } finally {
    $("add-button").disabled = state.status && state.status.voices_folder === null;
  }
}

// Decode any audio the browser can play and write its start as 16-bit mono WAV: the
// server decodes no more than `maxSeconds` of a recording, and at the browser's rate a
// longer WAV could be over the upload limit.
async function toWav(blob, maxSeconds) {
  const context = new (window.AudioContext || window.webkitAudioContext)();
  try {
    const audio = await context.decodeAudioData(await blob.arrayBuffer());
    const length = Math.min(audio.length, Math.floor(maxSeconds * audio.sampleRate));
    const mono = new Float32Array(length);
    for (let channel = 0; channel < audio.numberOfChannels; channel++) {
      const data = audio.getChannelData(channel);
      for (let i = 0; i < length; i++) mono[i] += data[i] / audio.numberOfChannels;
    }
    const view = new DataView(new ArrayBuffer(44 + 2 * length));
    const text = (offset, value) => [...value].forEach((c, i) => view.setUint8(offset + i, c.charCodeAt(0)));
    text(0, "RIFF"); view.setUint32(4, 36 + 2 * length, true); text(8, "WAVE");
    text(12, "fmt "); view.setUint32(16, 16, true); view.setUint16(20, 1, true); view.setUint16(22, 1, true);
    view.setUint32(24, audio.sampleRate, true); view.setUint32(28, 2 * audio.sampleRate, true);
    view.setUint16(32, 2, true); view.setUint16(34, 16, true);
    text(36, "data"); view.setUint32(40, 2 * length, true);
    for (let i = 0; i < length; i++) {
      const sample = Math.max(-1, Math.min(1, mono[i]));
      view.setInt16(44 + 2 * i, Math.round(sample * 32767), true);
    }
    return new Blob([view], { type: "audio/wav" });
  } catch (error) {
    throw new Error("Neither the server nor this browser can decode this file: convert it to WAV, FLAC, Ogg or MP3.");
  } finally {
    context.close();
  }
}

// -- recording --------------------------------------------------------------------------

// The recorder stops where the server stops listening: it decodes only a recording's
// first `decoded_seconds`.
let recorder = null;

async function toggleRecording() {
  if (recorder) { recorder.stop(); return; }
  const limits = state.status.limits;
  if (!navigator.mediaDevices || !window.MediaRecorder) {
    $("record-state").textContent =
      "Recording needs a secure page (https, or this computer's localhost): upload a file instead.";
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (error) {
    $("record-state").textContent = `No microphone: ${error.message}`;
    return;
  }
  const chunks = [];
  recorder = new MediaRecorder(stream);
  recorder.addEventListener("dataavailable", (event) => chunks.push(event.data));
  const started = Date.now();
  const timer = setInterval(() => {
    const seconds = (Date.now() - started) / 1000;
    $("record-state").textContent =
      `Recording… ${Math.round(seconds)} s of at most ${limits.decoded_seconds} (speak for ${speechAdvice(limits)})`;
    if (seconds >= limits.decoded_seconds && recorder) recorder.stop();
  }, 500);
  recorder.addEventListener("stop", async () => {
    clearInterval(timer);
    stream.getTracks().forEach((track) => track.stop());
    recorder = null;
    $("record").textContent = "Record with the microphone";
    try {
      const recorded = new Blob(chunks, { type: chunks[0] ? chunks[0].type : "" });
      const wav = await toWav(recorded, limits.decoded_seconds);
      state.recorded = new File([wav], "recording.wav", { type: "audio/wav" });
      $("record-state").textContent = `Recorded ${Math.round((Date.now() - started) / 1000)} s: name it and add it.`;
      if (!$("add-name").value) $("add-name").value = "my_voice";
    } catch (error) {
      $("record-state").textContent = error.message;
    }
  });
  recorder.start();
  $("record").textContent = "Stop recording";
}

// -- start ------------------------------------------------------------------------------

async function refreshAll() {
  try {
    const [status, voices] = await Promise.all([api("api/status"), api("api/voices")]);
    showStatus(status);  // first: it makes the languages' groups
    showVoices(voices);
  } catch (error) {
    say("voices-message", `Cannot reach the server: ${error.message}`, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("add-form").addEventListener("submit", addVoice);
  $("add-file").addEventListener("change", () => {
    const file = $("add-file").files[0];
    state.recorded = null;
    if (file && !$("add-name").value) $("add-name").value = suggestName(file.name);
  });
  $("record").addEventListener("click", toggleRecording);
  const player = $("player");
  player.addEventListener("playing", () => say("voices-message", `${player.dataset.voice} is speaking…`));
  player.addEventListener("ended", () => { say("voices-message", ""); refreshAll(); });
  player.addEventListener("error", () => say("voices-message", "The preview could not be played.", true));
  refreshAll();
  setInterval(refreshStatus, 10000);
});
