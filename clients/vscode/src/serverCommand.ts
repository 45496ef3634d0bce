/** Which executable starts the server. Pure (file checks injected), unit tested. */
import * as path from "node:path";

export const DEFAULT_COMMAND = "mnemo";

export interface Resolved {
  command: string;
  tried: string[];
}
export interface NotFound {
  command: undefined;
  tried: string[];
}

export interface Lookup {
  /** is this an executable file? */
  isExecutable(file: string): boolean;
  /** PATH entries */
  pathDirs: string[];
}

/**
 * `setting` is `mnemo.server.command`: a name looked up on PATH, or a path (relative ones are taken from
 * the workspace). The default `mnemo` falls back to `<workspace>/.venv/bin/mnemo`, what `make install`
 * creates in a mnemo checkout.
 */
export function resolveServerCommand(setting: string, workspace: string | undefined, lookup: Lookup): Resolved | NotFound {
  const wanted = setting.trim() || DEFAULT_COMMAND;
  const tried: string[] = [];
  const check = (file: string): string | undefined => {
    tried.push(file);
    return lookup.isExecutable(file) ? file : undefined;
  };
  if (wanted.includes("/") || wanted.includes("\\")) {
    const file = path.isAbsolute(wanted) || !workspace ? wanted : path.join(workspace, wanted);
    return { command: check(file), tried };
  }
  for (const dir of lookup.pathDirs) {
    if (!dir) continue;
    const found = check(path.join(dir, wanted));
    if (found) return { command: found, tried };
  }
  if (wanted === DEFAULT_COMMAND && workspace) {
    const found = check(path.join(workspace, ".venv", "bin", DEFAULT_COMMAND));
    if (found) return { command: found, tried };
  }
  return { command: undefined, tried };
}

export function missingServerMessage(setting: string, tried: string[]): string {
  const where = tried.length ? ` (looked for: ${tried.slice(-3).join(", ")}${tried.length > 3 ? ", …" : ""})` : "";
  return (
    `mnemo: the language server '${setting || DEFAULT_COMMAND}' was not found${where}. ` +
    "Run `make install` in the mnemo checkout (it creates .venv/bin/mnemo), " +
    "or set 'mnemo.server.command' to the mnemo executable."
  );
}
