// countersign's one script: passkeys. WebAuthn needs JavaScript, so a page
// that asks for a passkey loads this file (and only such a page). It reads
// the options the server put on the form, asks the browser's authenticator,
// puts the answer in a hidden field and sends the form. It makes no request
// of its own and never decides anything: the server verifies the answer.
(function () {
  "use strict";

  function fromB64u(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) s += "=";
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out.buffer;
  }

  function toB64u(buf) {
    var bytes = new Uint8Array(buf), s = "";
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function say(text) {
    var el = document.getElementById("passkey-status");
    if (el) { el.textContent = text; el.hidden = false; }
  }

  // The server's options, with their binary fields as ArrayBuffers.
  function requestOptions(json) {
    var pk = JSON.parse(json).publicKey;
    pk.challenge = fromB64u(pk.challenge);
    (pk.allowCredentials || []).forEach(function (c) { c.id = fromB64u(c.id); });
    return { publicKey: pk };
  }

  function creationOptions(json) {
    var pk = JSON.parse(json).publicKey;
    pk.challenge = fromB64u(pk.challenge);
    pk.user.id = fromB64u(pk.user.id);
    (pk.excludeCredentials || []).forEach(function (c) { c.id = fromB64u(c.id); });
    return { publicKey: pk };
  }

  function assertionJSON(cred) {
    var r = cred.response;
    return JSON.stringify({
      id: cred.id, rawId: toB64u(cred.rawId), type: cred.type,
      response: {
        clientDataJSON: toB64u(r.clientDataJSON), authenticatorData: toB64u(r.authenticatorData),
        signature: toB64u(r.signature), userHandle: r.userHandle ? toB64u(r.userHandle) : null
      },
      clientExtensionResults: cred.getClientExtensionResults()
    });
  }

  function attestationJSON(cred) {
    var r = cred.response;
    return JSON.stringify({
      id: cred.id, rawId: toB64u(cred.rawId), type: cred.type,
      response: {
        clientDataJSON: toB64u(r.clientDataJSON), attestationObject: toB64u(r.attestationObject),
        transports: r.getTransports ? r.getTransports() : []
      },
      clientExtensionResults: cred.getClientExtensionResults()
    });
  }

  // A decision on a step-up route: sign this very decision first.
  var decide = document.getElementById("decide");
  if (decide && decide.dataset.stepup === "passkey") {
    decide.addEventListener("submit", function (e) {
      if (decide.dataset.signed === "1") return;
      e.preventDefault();
      var button = e.submitter;
      var reject = button && button.value === "reject";
      var json = reject ? decide.dataset.reject : decide.dataset.approve;
      if (!window.PublicKeyCredential || !json) { say("This browser cannot use passkeys, so it cannot decide this request."); return; }
      say("Confirm with your passkey…");
      navigator.credentials.get(requestOptions(json)).then(function (cred) {
        decide.elements.assertion.value = assertionJSON(cred);
        decide.dataset.signed = "1";
        decide.requestSubmit(button);
      }, function (err) {
        say("Your passkey did not confirm (" + err.name + "). Nothing was decided; press the button to try again.");
      });
    });
  }

  // The enrolment page: create a passkey for this approver.
  var enrol = document.getElementById("enrol");
  if (enrol) {
    enrol.addEventListener("submit", function (e) {
      if (enrol.dataset.created === "1") return;
      e.preventDefault();
      if (!window.PublicKeyCredential) { say("This browser cannot create passkeys."); return; }
      say("Create the passkey on your device…");
      navigator.credentials.create(creationOptions(enrol.dataset.options)).then(function (cred) {
        enrol.elements.credential.value = attestationJSON(cred);
        enrol.dataset.created = "1";
        enrol.requestSubmit();
      }, function (err) {
        say("No passkey was created (" + err.name + "). Press the button to try again.");
      });
    });
  }
})();
