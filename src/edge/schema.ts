/** JSON Schema of the `tls` key (the public TLS listener); see ../config/schema.ts and docs/edge.md. */
import { MAX_HOST_NAME_LENGTH } from './host-value.js';

/** A server name: an exact DNS name or `*.` followed by one. */
export const SERVER_NAME_PATTERN = '^(\\*\\.)?([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$';

const certificateSchema = {
  type: 'object',
  description:
    'One certificate and the server names it serves. The files are read and checked (PEM, key matches certificate, ' +
    'not expired) when the config is loaded and at every reload (SIGHUP); a relative path is relative to the config file.',
  additionalProperties: false,
  required: ['certFile', 'keyFile'],
  properties: {
    certFile: { type: 'string', minLength: 1, description: 'PEM file: the certificate, then its intermediates.' },
    keyFile: { type: 'string', minLength: 1, description: "PEM file of the certificate's private key." },
    passphraseEnv: {
      type: 'string',
      minLength: 1,
      description: 'Name of the environment variable holding the passphrase of an encrypted key.',
    },
    serverNames: {
      type: 'array',
      items: { type: 'string', pattern: SERVER_NAME_PATTERN, maxLength: MAX_HOST_NAME_LENGTH },
      default: [],
      description:
        'SNI names this certificate serves: exact ("api.example.com") or wildcard ("*.example.com": one label, as TLS clients ' +
        'check a wildcard certificate). An exact name wins over a wildcard, a longer wildcard over a shorter one; lower case.',
    },
  },
} as const;

export const tlsSchema = {
  type: 'object',
  description:
    'A TLS listener beside the plain one. The first certificate serves clients without SNI or with a name no certificate lists.',
  additionalProperties: false,
  required: ['port', 'certificates'],
  properties: {
    port: { type: 'integer', minimum: 0, maximum: 65535, description: 'Port of the TLS listener (restart only).' },
    plainPort: {
      type: 'string',
      enum: ['serve', 'redirect', 'off'],
      default: 'serve',
      description:
        'What the plain `port` does: "serve" as before, "redirect" every request to https with 308 (the built-in endpoints ' +
        'are still served), "off" (not opened). Restart only.',
    },
    minVersion: {
      type: 'string',
      enum: ['TLSv1.2', 'TLSv1.3'],
      default: 'TLSv1.2',
      description:
        'Lowest TLS version accepted. The uWebSockets.js builds in use accept TLS 1.2 and 1.3 and cannot be told to refuse 1.2, so "TLSv1.3" is refused.',
    },
    hstsMaxAgeS: {
      type: 'integer',
      minimum: 0,
      default: 0,
      description: 'When > 0, answers over TLS carry "Strict-Transport-Security: max-age=<this>".',
    },
    certificates: { type: 'array', minItems: 1, items: certificateSchema, description: 'The certificates, the default first.' },
  },
} as const;
