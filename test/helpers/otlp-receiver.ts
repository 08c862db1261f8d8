// An OTLP/HTTP (JSON) traces receiver on loopback for tests: it keeps every span it is sent.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

/** A span as OTLP/JSON carries it (the fields the tests read). */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
  status?: { code?: number };
}

export interface OtlpReceiver {
  /** The traces endpoint to configure (`.../v1/traces`). */
  url: string;
  spans: OtlpSpan[];
  /** Every resource's service.name seen. */
  services: Set<string>;
  /** The attributes of the last resource seen. */
  resource: () => Record<string, unknown>;
  posts: () => number;
  /** The next `count` exports are answered `status` (with `headers`) and their spans not kept. */
  refuseNext: (count: number, status: number, headers?: Record<string, string>) => void;
}

/** Listens on 127.0.0.1 until the test ends; answers every export 200 `{}` (but see refuseNext). */
export async function startOtlpReceiver(t: Test): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const services = new Set<string>();
  let posts = 0;
  let lastResource: Record<string, unknown> = {};
  let refusals = 0;
  let refusal: { status: number; headers: Record<string, string> } = { status: 503, headers: {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      posts++;
      if (refusals > 0) {
        refusals--;
        res.writeHead(refusal.status, refusal.headers);
        res.end('not now');
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: Array<{ resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
      };
      for (const resource of body.resourceSpans) {
        const name = resource.resource.attributes.find((a) => a.key === 'service.name');
        if (name) services.add(String(name.value.stringValue));
        lastResource = Object.fromEntries(resource.resource.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
        for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    spans,
    services,
    resource: () => lastResource,
    posts: () => posts,
    refuseNext: (count, status, headers = {}) => {
      refusals = count;
      refusal = { status, headers };
    },
  };
}
