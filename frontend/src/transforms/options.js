// Loud option checking: a typo or a wrong type is an error naming the option, never a
// silent default (observablehq/plot's habit).

export class OptionError extends TypeError {
  constructor(message) {
    super(message);
    this.name = "OptionError";
  }
}

/**
 * @typedef {{type: "number"|"string"|"boolean"|"function"|"set"|"object"|"any",
 *   default?: any, min?: number, max?: number, oneOf?: readonly any[], nullable?: boolean}} OptionSpec
 */

/**
 * Returns the options with defaults filled in; throws OptionError on an unknown key,
 * a wrong type, a number out of range or a value not among `oneOf`.
 * @param {string} owner who takes the options, for the message
 * @param {Record<string, any>|undefined} options
 * @param {Record<string, OptionSpec>} schema
 * @returns {Record<string, any>}
 */
export function checkOptions(owner, options, schema) {
  const given = options ?? {};
  if (typeof given !== "object" || Array.isArray(given)) {
    throw new OptionError(`${owner}: options must be an object, got ${describe(given)}`);
  }
  for (const key of Object.keys(given)) {
    if (!(key in schema)) {
      const known = Object.keys(schema).join(", ");
      throw new OptionError(`${owner}: unknown option "${key}" (known: ${known})`);
    }
  }
  /** @type {Record<string, any>} */
  const out = {};
  for (const [key, spec] of Object.entries(schema)) {
    const value = given[key] === undefined ? spec.default : given[key];
    out[key] = checkOne(owner, key, value, spec);
  }
  return out;
}

function checkOne(owner, key, value, spec) {
  if (value == null) {
    if (spec.nullable || spec.default == null) return value ?? null;
    throw new OptionError(`${owner}: option "${key}" is required`);
  }
  if (!hasType(value, spec.type)) {
    throw new OptionError(`${owner}: option "${key}" must be a ${spec.type}, got ${describe(value)}`);
  }
  if (spec.type === "number") {
    if (!Number.isFinite(value)) throw new OptionError(`${owner}: option "${key}" must be finite, got ${value}`);
    if (spec.min != null && value < spec.min) {
      throw new OptionError(`${owner}: option "${key}" must be at least ${spec.min}, got ${value}`);
    }
    if (spec.max != null && value > spec.max) {
      throw new OptionError(`${owner}: option "${key}" must be at most ${spec.max}, got ${value}`);
    }
  }
  if (spec.oneOf && !spec.oneOf.includes(value)) {
    throw new OptionError(`${owner}: option "${key}" must be one of ${spec.oneOf.map((v) => JSON.stringify(v)).join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value;
}

function hasType(value, type) {
  switch (type) {
    case "any":
      return true;
    case "set":
      return value instanceof Set;
    case "object":
      return typeof value === "object" && !Array.isArray(value);
    default:
      return typeof value === type;
  }
}

function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (value instanceof Set) return "a Set";
  return `${typeof value} ${JSON.stringify(value)}`;
}
