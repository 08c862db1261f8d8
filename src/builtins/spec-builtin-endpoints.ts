import { emptyPart, type SpecPart } from './spec-types.js';

export const BUILTIN_NAMESPACE = 'specgate';
const TAG = 'specgate';
const json = ['application/json'];

const stringList = { type: 'array', items: { type: 'string' } };
const componentStates = {
  type: 'object',
  required: ['pending', 'ready'],
  properties: { pending: stringList, ready: stringList, failing: stringList },
};

/** /healthcheck, /metrics and /spec, as the gateway serves them (docs/reference/builtins.md). */
export function builtinPart(paths: { healthcheck: string; metrics: string; spec: string }): SpecPart {
  const part = emptyPart();
  const healthRef = { $ref: `#/definitions/${BUILTIN_NAMESPACE}.HealthReport` };
  part.tags = [{ name: TAG, description: 'Endpoints the gateway answers itself' }];
  part.definitions[`${BUILTIN_NAMESPACE}.HealthReport`] = {
    type: 'object',
    required: ['listeners', 'middleware', 'upstreams', 'buildInfo', 'host'],
    properties: {
      listeners: componentStates,
      middleware: componentStates,
      upstreams: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            serviceType: { type: 'string', enum: ['swagger2', 'openapi3', 'static'] },
            serviceLocation: { type: 'string' },
            weight: { type: 'integer' },
            state: { type: 'string', enum: ['pending', 'ready', 'failed'] },
            endpoints: { type: 'integer' },
            lastError: { type: 'string' },
          },
        },
      },
      buildInfo: {
        type: 'object',
        properties: Object.fromEntries(
          ['builtAtMillis', 'name', 'scalaVersion', 'version', 'sbtVersion', 'builtAtString'].map((key) => [key, { type: 'string' }]),
        ),
      },
      host: { type: 'string' },
      workers: {
        type: 'object',
        properties: {
          expected: { type: 'integer' },
          serving: { type: 'integer' },
          tableVersion: { type: 'integer', 'x-nullable': true },
          slots: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                slot: { type: 'integer' },
                pid: { type: 'integer', 'x-nullable': true },
                tableVersion: { type: 'integer', 'x-nullable': true },
              },
            },
          },
        },
      },
    },
  };
  const operation = (operationId: string, summary: string, responses: object) => ({
    operationId,
    summary,
    tags: [TAG],
    produces: json,
    parameters: [],
    responses,
  });
  part.operations.push(
    {
      path: paths.healthcheck,
      method: 'get',
      operation: operation('specgateHealthcheck', 'Health of the gateway and its upstreams', {
        200: { description: 'Operational (stays 200 once reached, whatever happens to upstreams)', schema: healthRef },
        503: { description: 'Still starting', schema: healthRef },
      }),
    },
    {
      path: paths.metrics,
      method: 'get',
      operation: operation('specgateMetrics', 'Request metrics, merged across workers', {
        200: { description: 'Metrics report', schema: { type: 'object' } },
      }),
    },
    {
      path: paths.spec,
      method: 'get',
      operation: operation('specgateSpec', 'This document: every endpoint of every ready upstream', {
        200: { description: 'Swagger 2.0 document', schema: { type: 'object' } },
      }),
    },
  );
  return part;
}
