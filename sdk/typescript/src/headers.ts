/**
 * Request headers in the shapes users hold them — a fetch `Headers`, a plain object (Node's
 * `req.headers`, a framework's map), or an array of `[name, value]` pairs — read by lowercase
 * name. A name given more than once is joined with `", "` (as `Headers` does); values lose
 * their surrounding spaces and tabs (HTTP's optional whitespace, as `Headers` does).
 */

export type HeaderValue = string | readonly string[] | number | undefined | null;

export type HeadersInput =
  | Headers
  | { readonly [name: string]: HeaderValue }
  | Iterable<readonly [string, string]>;

/** Headers by lowercase name. */
export type HeaderMap = Map<string, string>;

export function headerMap(headers: HeadersInput): HeaderMap {
  const map: HeaderMap = new Map();
  const add = (name: string, value: string): void => {
    const key = name.toLowerCase();
    const v = trimOws(value);
    const prev = map.get(key);
    map.set(key, prev === undefined ? v : `${prev}, ${v}`);
  };
  if (headers == null || typeof headers !== 'object') {
    throw new TypeError('headers must be a Headers, a plain object or an array of [name, value] pairs');
  }
  if (typeof Headers !== 'undefined' && headers instanceof Headers) {
    headers.forEach((value, name) => map.set(name.toLowerCase(), value));
    return map;
  }
  if (isIterable(headers)) {
    for (const pair of headers) {
      if (!Array.isArray(pair) || pair.length !== 2) {
        throw new TypeError('headers given as an iterable must hold [name, value] pairs');
      }
      add(String(pair[0]), String(pair[1]));
    }
    return map;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) {
      for (const v of value) add(name, String(v));
    } else {
      add(name, String(value));
    }
  }
  return map;
}

function isIterable(x: object): x is Iterable<readonly [string, string]> {
  return typeof (x as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function';
}

/** Trims spaces and tabs by index (a regex like `[ \t]+$` is quadratic on hostile input). */
function trimOws(v: string): string {
  let start = 0;
  let end = v.length;
  while (start < end && isOws(v.charCodeAt(start))) start++;
  while (end > start && isOws(v.charCodeAt(end - 1))) end--;
  return start === 0 && end === v.length ? v : v.slice(start, end);
}

function isOws(c: number): boolean {
  return c === 32 || c === 9;
}

/** A header's value, or `null` when it is absent or empty. */
export function nonEmpty(map: HeaderMap, name: string): string | null {
  const v = map.get(name);
  return v === undefined || v === '' ? null : v;
}
