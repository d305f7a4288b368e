// The /jobs page's task upload: the chosen file goes to the API as a multipart POST
// (POST /api/tasks/upload, streamed to disk there) with a progress bar, instead of base64 inside a
// Dash callback (whose JSON body the server refused past ~730 KB, silently). Every outcome is one
// line under the button: the task added, or why the file was refused (its size limit included).
(function () {
  "use strict";

  function mib(bytes) {
    return (bytes / 1048576).toFixed(bytes < 10485760 ? 1 : 0) + " MiB";
  }

  function say(node, text, ok) {
    node.textContent = text;
    node.className = "submit-result alert " + (ok ? "alert-success" : "alert-danger");
    node.id = "jb-task-result";
    node.setAttribute("data-outcome", ok ? "added" : "refused");
  }

  // the API's error body as one line: a 422 lists one message per bad row (the first few named)
  function why(xhr, limitText) {
    var detail;
    try {
      detail = JSON.parse(xhr.responseText).detail;
    } catch (e) {
      detail = xhr.responseText || xhr.statusText;
    }
    if (Array.isArray(detail)) {
      var msgs = detail.map(function (d) { return d && d.msg ? d.msg : String(d); });
      var shown = msgs.slice(0, 3).join("; ");
      detail = shown + (msgs.length > 3 ? "; and " + (msgs.length - 3) + " more" : "");
    }
    if (xhr.status === 413) {
      return "refused: the file is too large (" + limitText + "): " + detail;
    }
    return "refused (HTTP " + xhr.status + "): " + detail;
  }

  function upload(button) {
    var input = document.getElementById("jb-task-file");
    var nameBox = document.getElementById("jb-task-name");
    var result = document.getElementById("jb-task-result");
    var bar = document.getElementById("jb-task-progress");
    var maxBytes = parseInt(button.getAttribute("data-max-bytes"), 10);
    var limitText = "the limit is " + mib(maxBytes) + ", as for layerscope task add";
    var file = input && input.files && input.files[0];
    var name = nameBox ? nameBox.value.trim() : "";
    if (!file) {
      return say(result, "Choose a file first.", false);
    }
    if (!name) {
      return say(result, "Give the task a name.", false);
    }
    if (file.size > maxBytes) {
      return say(result, file.name + " not sent: " + mib(file.size) + "; " + limitText + ".", false);
    }
    var form = new FormData();
    form.append("name", name);
    form.append("file", file, file.name);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", button.getAttribute("data-url"));
    xhr.setRequestHeader("Accept", "application/json");
    bar.style.display = "";
    bar.value = 0;
    button.disabled = true;
    result.textContent = "Uploading " + file.name + " (" + mib(file.size) + ")…";
    result.className = "submit-result muted";
    xhr.upload.onprogress = function (ev) {
      if (ev.lengthComputable) {
        bar.value = Math.round((100 * ev.loaded) / ev.total);
        result.textContent = "Uploading " + file.name + ": " + bar.value + "% of " + mib(ev.total) +
          (bar.value === 100 ? "; validating…" : "");
      }
    };
    xhr.onload = function () {
      button.disabled = false;
      bar.style.display = "none";
      if (xhr.status === 201) {
        var t = JSON.parse(xhr.responseText);
        say(result, "Task " + t.name + " added: " + t.n_rows + " rows, lengths " + t.lengths[0] + ".." +
          t.lengths[t.lengths.length - 1] + ", classes " + t.class_names.join(", ") +
          ". Reload to pick it in the form.", true);
      } else {
        say(result, file.name + " " + why(xhr, limitText), false);
      }
    };
    xhr.onerror = function () {
      button.disabled = false;
      bar.style.display = "none";
      say(result, file.name + " not sent: the API could not be reached (" + limitText + ").", false);
    };
    xhr.send(form);
  }

  // Dash has no file input: put one in the card's slot whenever the page (re)renders it; it is
  // disabled when Add task is (a read-only server)
  function fillSlot() {
    var slot = document.getElementById("jb-task-file-slot");
    if (!slot || slot.querySelector("input")) {
      return;
    }
    var input = document.createElement("input");
    input.type = "file";
    input.id = "jb-task-file";
    input.className = "input";
    input.accept = slot.getAttribute("data-accept") || "";
    var button = document.getElementById("jb-task-add");
    input.disabled = !!(button && button.disabled);
    slot.appendChild(input);
  }

  new MutationObserver(fillSlot).observe(document.documentElement, { childList: true, subtree: true });

  document.addEventListener("click", function (ev) {
    var button = ev.target && ev.target.closest ? ev.target.closest("#jb-task-add") : null;
    if (button && !button.disabled) {
      ev.preventDefault();
      upload(button);
    }
  });
})();
