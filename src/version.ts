import { readFileSync } from 'node:fs';

/** The package version, read from package.json beside src/ and dist/ (`verdict --version`, the MCP handshake). */
export const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
