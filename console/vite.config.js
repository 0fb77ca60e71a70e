// Builds the console into the Python package (src/graphrecall/server/console_assets), served under /ui: the built
// files are committed, so `pip install graphrecall[server]` needs no node (tests check they match these sources).
import { defineConfig } from "vite";

export default defineConfig({
  root: ".",
  base: "/ui/",
  build: {
    outDir: "../src/graphrecall/server/console_assets",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    chunkSizeWarningLimit: 1000,
  },
});
