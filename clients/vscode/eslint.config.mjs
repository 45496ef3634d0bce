// Flat config: typescript-eslint's type-checked rules over the extension, the webview and the tests.
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", "out/", ".e2e/", "*.vsix"] },
  js.configs.recommended,
  {
    files: ["**/*.ts"],
    extends: [...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        project: ["./tsconfig.json", "./tsconfig.webview.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      eqeqeq: "error",
      "no-restricted-syntax": [
        "error",
        { selector: "CallExpression[callee.name='eval']", message: "no eval" },
      ],
    },
  },
  { files: ["webview/**/*.ts"], languageOptions: { globals: globals.browser } },
  {
    // node:test's describe/it return promises the runner awaits; fakes are async without awaiting.
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-floating-promises": "off", "@typescript-eslint/require-await": "off" },
  },
  { files: ["**/*.mjs", "scripts/**/*.js"], languageOptions: { globals: globals.node } },
);
