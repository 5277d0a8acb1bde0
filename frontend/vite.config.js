// Builds the browser bundle into dist/ for Django's staticfiles (STATICFILES_DIRS).
// Fixed file names (assets/main.js, assets/main.css) so templates need no manifest
// lookup; the manifest (.vite/manifest.json) is still written for anything that wants it.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/static/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    manifest: true,
    sourcemap: true,
    rolldownOptions: {
      input: "src/main.js",
      output: {
        entryFileNames: "assets/[name].js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: "assets/[name][extname]",
      },
    },
  },
  test: {
    environment: "node",
    include: ["tests/**/*.test.js"],
  },
});
