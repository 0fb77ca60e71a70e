// Writes the SHA-256 of the console's sources beside the built assets, so a Python test (which needs no node) can
// tell that the committed build is the build of the committed sources. The same walk is in
// tests/integration/test_console_assets.py: sorted relative paths, each "path\0content\0".
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

export const SOURCES = ["index.html", "package.json", "package-lock.json", "vite.config.js", "stamp.mjs", "src"];

function walk(path, out) {
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path)) walk(join(path, name), out);
  } else {
    out.push(path);
  }
}

const files = [];
for (const s of SOURCES) walk(s, files);
const hash = createHash("sha256");
for (const f of files.map((f) => relative(".", f).split("\\").join("/")).sort()) {
  hash.update(f + "\0");
  hash.update(readFileSync(f));
  hash.update("\0");
}
writeFileSync("../src/graphrecall/server/console_assets/SOURCES.sha256", hash.digest("hex") + "\n");
