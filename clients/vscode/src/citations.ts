/** Citations `path#Lx-Ly` (docs/protocol.md: workspace-relative path, 1-based file lines). Pure. */

export interface Citation {
  path: string;
  startLine: number;
  endLine: number;
}

/** A citation anywhere in text: a relative path ending in .md, then #L12 or #L12-L18 (or #L12-18). */
export const CITATION_RE = /(?<![\w/.-])((?:[\w.-]+\/)*[\w.-]+\.md)#L(\d+)(?:-L?(\d+))?/g;

export function parseCitation(text: string): Citation | undefined {
  const m = /^((?:[\w.-]+\/)*[\w.-]+\.md)#L(\d+)(?:-L?(\d+))?$/.exec(text.trim());
  if (!m) return undefined;
  const path = m[1];
  if (path.split("/").some((part) => part === ".." || part === ".")) return undefined;
  const startLine = Number(m[2]);
  const endLine = m[3] === undefined ? startLine : Number(m[3]);
  if (startLine < 1 || endLine < startLine) return undefined;
  return { path, startLine, endLine };
}

export function formatCitation(c: Citation): string {
  return c.startLine === c.endLine ? `${c.path}#L${c.startLine}` : `${c.path}#L${c.startLine}-L${c.endLine}`;
}
