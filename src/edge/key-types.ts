/**
 * Which certificate keys the TLS library linked into the uWS binary (BoringSSL) can serve. node:crypto
 * (OpenSSL) reads more than BoringSSL: a key BoringSSL cannot read crashes the worker inside
 * `addServerName` (or fails `SSLApp`), so the config is refused instead. The allow-list, and how each
 * entry was tried against the binary, is in native-notes.md ("TLS in the build in use").
 */
import type { KeyObject } from 'node:crypto';

export const SUPPORTED_KEYS = 'use RSA (1024 to 16384 bits), ECDSA P-256/P-384/P-521 or Ed25519';

const CURVES: Readonly<Record<string, string>> = { prime256v1: 'P-256', secp384r1: 'P-384', secp521r1: 'P-521' };
const TYPE_NAMES: Readonly<Record<string, string>> = { 'rsa-pss': 'RSA-PSS', dsa: 'DSA', ed448: 'Ed448', x25519: 'X25519', x448: 'X448', dh: 'DH' };
/** id-ecPublicKey in DER; the curve follows it, as an OID (named) or a SEQUENCE (explicit parameters). */
const EC_PUBLIC_KEY = Buffer.from('06072a8648ce3d0201', 'hex');
const DER_OID = 0x06;
/** RSA keys shorter than this do not sign TLS 1.3's RSA-PSS handshakes (512 bits measured failing). */
const MIN_RSA_BITS = 1024;
/** BoringSSL refuses a longer modulus (16400 bits measured crashing). */
const MAX_RSA_BITS = 16384;

export interface KeyRefusal {
  /** The key's type itself (reported on keyFile) or how the certificate writes it (certFile). */
  about: 'key' | 'certificate';
  why: string;
}

/** Why the certificate whose public key is `key` cannot be served by uWS; null when it can. */
export function unservableKey(key: KeyObject): KeyRefusal | null {
  const type = key.asymmetricKeyType ?? 'unknown';
  if (type === 'ed25519') return null;
  if (type === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) return { about: 'key', why: `an RSA key of ${bits} bits is too short for TLS 1.3 clients; ${SUPPORTED_KEYS}` };
    if (bits > MAX_RSA_BITS) return { about: 'key', why: `an RSA key of ${bits} bits is longer than the TLS library reads; ${SUPPORTED_KEYS}` };
    return null;
  }
  if (type === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve ?? 'unknown';
    const name = CURVES[curve];
    if (name === undefined) return { about: 'key', why: `key type ECDSA ${curve} is not supported by the TLS library; ${SUPPORTED_KEYS}` };
    if (namesItsCurve(key)) return null;
    return {
      about: 'certificate',
      why: `its ECDSA ${name} key is written with explicit curve parameters, which the TLS library does not read; reissue it with the curve named (openssl's default)`,
    };
  }
  return { about: 'key', why: `key type ${TYPE_NAMES[type] ?? type} is not supported by the TLS library; ${SUPPORTED_KEYS}` };
}

/** The SubjectPublicKeyInfo names its curve: the parameters after id-ecPublicKey are an OID. */
function namesItsCurve(key: KeyObject): boolean {
  const der = key.export({ type: 'spki', format: 'der' });
  const at = der.indexOf(EC_PUBLIC_KEY);
  return at !== -1 && der[at + EC_PUBLIC_KEY.length] === DER_OID;
}
