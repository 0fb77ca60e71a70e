// The generator's settings: `npm run generate` rewrites src/generated from the committed API document. The output
// is committed; tests/integration/test_typescript_client.py regenerates it and fails when the two differ.
export default {
  input: "../../docs/openapi.json",
  // ".js" on relative imports: Node runs the compiled ES modules as they are, without a bundler.
  output: { path: "src/generated", postProcess: [], importFileExtension: ".js" },
  plugins: [
    "@hey-api/client-fetch",
    "@hey-api/typescript",
    "@hey-api/sdk",
  ],
};
