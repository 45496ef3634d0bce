/** The chat webview's HTML: a strict Content-Security-Policy, scripts only with the per-load nonce. */

export function makeNonce(random: () => number = Math.random): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let nonce = "";
  for (let i = 0; i < 32; i++) nonce += chars.charAt(Math.floor(random() * chars.length));
  return nonce;
}

export interface ChatHtmlOptions {
  /** webview.cspSource */
  cspSource: string;
  nonce: string;
  scriptUri: string;
  styleUri: string;
}

export function chatHtml(o: ChatHtmlOptions): string {
  const csp = [
    "default-src 'none'",
    `style-src ${o.cspSource}`,
    `font-src ${o.cspSource}`,
    `img-src ${o.cspSource} data:`,
    `script-src 'nonce-${o.nonce}'`,
  ].join("; ");
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${csp}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <link href="${o.styleUri}" rel="stylesheet">
  <title>mnemo chat</title>
</head>
<body>
  <header>
    <select id="session" title="Sessions" aria-label="Session"></select>
    <button id="new" class="icon" title="New session">New</button>
    <button id="reset" class="icon" title="Reset this session">Reset</button>
    <button id="flush" class="icon" title="Flush what matters from this session into memory">Flush</button>
  </header>
  <div id="model" class="model" hidden><span id="model-name"></span><span id="model-note" class="model-note"></span></div>
  <div id="notice" class="notice" hidden></div>
  <main id="messages" aria-live="polite"></main>
  <section id="approvals"></section>
  <footer>
    <textarea id="input" rows="3" placeholder="Ask mnemo… (Enter to send, Shift+Enter for a new line)"></textarea>
    <div class="actions">
      <button id="send">Send</button>
      <button id="stop" class="danger" hidden>Stop</button>
    </div>
  </footer>
  <script nonce="${o.nonce}" src="${o.scriptUri}"></script>
</body>
</html>`;
}
