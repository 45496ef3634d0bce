/**
 * Chat Markdown -> HTML for the webview, with `marked`. Raw HTML in an answer is shown as text, never
 * interpreted; images are not loaded; links only carry data attributes that the webview script turns into
 * messages to the extension (which opens files at cited lines, or http(s) links externally).
 * Citations `path#Lx-Ly` anywhere in the text become links. Pure (no DOM), unit tested in Node.
 */
import { Marked, type Tokens, type TokenizerAndRendererExtension } from "marked";
import { formatCitation, parseCitation, type Citation } from "../src/citations";

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export function citationLink(c: Citation, label?: string): string {
  const text = escapeHtml(label ?? formatCitation(c));
  return (
    `<a class="cite" href="#" data-path="${escapeHtml(c.path)}" data-start="${c.startLine}" ` +
    `data-end="${c.endLine}" title="Open ${escapeHtml(formatCitation(c))}">${text}</a>`
  );
}

const INLINE_CITATION = /^((?:[\w.-]+\/)*[\w.-]+\.md)#L(\d+)(?:-L?(\d+))?/;
const CITATION_START = /(?:^|[^\w/.-])(?:[\w.-]+\/)*[\w.-]+\.md#L\d/;

interface CitationToken extends Tokens.Generic {
  type: "citation";
  raw: string;
  /** undefined: looked like a citation but is not one (`../x.md#L1`): shown as plain text */
  citation?: Citation;
}

const citationExtension: TokenizerAndRendererExtension = {
  name: "citation",
  level: "inline",
  start(src: string) {
    const m = CITATION_START.exec(src);
    if (!m) return undefined;
    return m[0].length > 0 && !/[\w.-]/.test(m[0][0]) ? m.index + 1 : m.index;
  },
  tokenizer(src: string): CitationToken | undefined {
    const m = INLINE_CITATION.exec(src);
    if (!m) return undefined;
    return { type: "citation", raw: m[0], citation: parseCitation(m[0]) };
  },
  renderer(token) {
    const { citation, raw } = token as CitationToken;
    return citation ? citationLink(citation) : escapeHtml(raw);
  },
};

const SAFE_LINK = /^(https?:|mailto:)/i;

const marked = new Marked({ gfm: true, breaks: true, async: false });
marked.use({
  extensions: [citationExtension],
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    image({ text }) {
      return escapeHtml(text);
    },
    codespan({ text }) {
      // `text` arrives escaped; a code span holding only a citation is still a link.
      const raw = text.replace(/&amp;/g, "&").replace(/&#39;/g, "'").replace(/&quot;/g, '"');
      const citation = parseCitation(raw);
      return citation ? `<code>${citationLink(citation)}</code>` : `<code>${text}</code>`;
    },
    link({ href, tokens }) {
      const label = this.parser.parseInline(tokens);
      const citation = parseCitation(href);
      if (citation) {
        return (
          `<a class="cite" href="#" data-path="${escapeHtml(citation.path)}" data-start="${citation.startLine}" ` +
          `data-end="${citation.endLine}" title="Open ${escapeHtml(formatCitation(citation))}">${label}</a>`
        );
      }
      if (SAFE_LINK.test(href)) {
        return `<a class="ext" href="#" data-href="${escapeHtml(href)}" title="${escapeHtml(href)}">${label}</a>`;
      }
      return label;
    },
  },
});

export function renderMarkdown(text: string): string {
  return marked.parse(text) as string;
}
