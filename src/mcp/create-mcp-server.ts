import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Verdict } from '../compose/verdict.js';
import type { McpServerOptions } from './mcp-server.js';

export type { McpServerOptions } from './mcp-server.js';
export type { McpHttpOptions } from './mcp-http.js';

/**
 * Verdict's MCP server for one client (DESIGN §16.5; see mcp-server.ts for the tools, the resource,
 * access and logs): an `McpServer` of @modelcontextprotocol/sdk, not yet connected. Connect it to
 * a transport of the SDK (`StdioServerTransport`, a `StreamableHTTPServerTransport` per session,
 * as `/mcp` of createApiServer does). The SDK is loaded on the first call, so a library user who
 * never serves MCP never loads it.
 */
export async function createMcpServer(verdict: Verdict, options: McpServerOptions): Promise<McpServer> {
  const m = await import('./mcp-server.js');
  return m.createMcpServer(verdict, options);
}
