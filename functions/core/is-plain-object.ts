/** A JSON object: not null, not an array (settings, sidecars and lock files are read as these). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
