/**
 * The graphrecall client: the operations generated from docs/openapi.json (`search`, `addSession`, ... named by
 * the API's operation ids, with their request and response types), and the two things a generator cannot know:
 * how to authenticate (an API key, sent as `Authorization: Bearer <key>` on every call) and what a failure looks
 * like (the server's `{"error": {"code", "message", "field"}}` body, thrown as a typed `GraphRecallError`).
 *
 * ```ts
 * const memory = new GraphRecall({ baseUrl: "http://localhost:8000", apiKey: process.env.GRAPHRECALL_KEY });
 * const { hits } = await memory.call(search, { path: { org: "acme", user: "ada" }, query: { query: "where?" } });
 * ```
 */
import { type Client, createClient } from "./generated/client/index.js";
import type { Options } from "./generated/sdk.gen.js";

/** A generated operation (any of `./generated/sdk.gen.ts`). */
// biome-ignore lint/suspicious/noExplicitAny: each operation has its own options; `call` reads them off its type.
type Operation = (options: any) => Promise<{ data?: unknown }>;
/** What an operation answers on success: its 2xx body (the throwing form's `data`, never `undefined`). */
type Body<F extends Operation> = NonNullable<Awaited<ReturnType<F>>["data"]>;

export * from "./generated/sdk.gen.js";
export type * from "./generated/types.gen.js";

/** A refusal or failure the server answered: `code` is stable (branch on it), `message` is for people, `field`
 * names the offending input (`messages[0].content`) when there is one. */
export class GraphRecallError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | null;

  constructor(status: number, code: string, message: string, field: string | null = null) {
    super(`HTTP ${status} ${code}: ${message}${field ? ` (field ${field})` : ""}`);
    this.name = "GraphRecallError";
    this.status = status;
    this.code = code;
    this.field = field;
  }

  /** The error a response carries: the API's error body when there is one; otherwise (a proxy's page, the HTTP
   * parser's plain-text refusal) `http_<status>` with the text, so callers always get the same shape. */
  static from(body: unknown, response: Response): GraphRecallError {
    const error = (body as { error?: unknown } | null)?.error as
      | { code?: unknown; message?: unknown; field?: unknown }
      | undefined;
    if (error && typeof error.code === "string" && typeof error.message === "string") {
      return new GraphRecallError(
        response.status,
        error.code,
        error.message,
        typeof error.field === "string" ? error.field : null,
      );
    }
    const text = typeof body === "string" ? body : JSON.stringify(body ?? "");
    return new GraphRecallError(response.status, `http_${response.status}`, text || response.statusText);
  }
}

export interface GraphRecallOptions {
  /** Where the server is, e.g. `http://localhost:8000`. */
  baseUrl: string;
  /** An API key of the server (`graphrecall keys create`); omit only for a server run without keys. */
  apiKey?: string;
  /** Another `fetch` (a test double, a proxy-aware one); the global one by default. */
  fetch?: typeof fetch;
}

/** One server, one key. `call(operation, options)` runs a generated operation and returns its response body, or
 * throws `GraphRecallError`; `client` is the configured transport for calling the generated functions directly
 * (`search({ client: memory.client, ... })`). */
export class GraphRecall {
  readonly client: Client;

  constructor(options: GraphRecallOptions) {
    if (!options.baseUrl) throw new TypeError("GraphRecall: baseUrl is required (e.g. http://localhost:8000)");
    this.client = createClient({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      // The generated operations declare the bearer scheme; the client sends this as `Authorization: Bearer`.
      auth: options.apiKey,
      fetch: options.fetch,
      throwOnError: true,
    });
    this.client.interceptors.error.use((body, response) => GraphRecallError.from(body, response));
  }

  /** Run `operation` (a generated function: `search`, `addSession`, ...) against this server; its 2xx body. */
  async call<F extends Operation>(operation: F, options: Omit<Parameters<F>[0], "client" | "throwOnError">): Promise<Body<F>> {
    const options_: Options = { ...options, client: this.client, throwOnError: true };
    const { data } = await operation(options_);
    return data as Body<F>;
  }
}
