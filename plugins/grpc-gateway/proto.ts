/**
 * A .proto file, its methods, and the REST bindings its `google.api.http` annotations declare (Kong's deco.lua reads
 * them the same way: each method's rule and its `additional_bindings`, one level deep). Compiled once per
 * plugin instance; an unreadable file or a proto that does not parse is the config's error.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import protobuf from 'protobufjs';
import { compileOperatorRegex, ConfigCompileError, type OperatorRegex } from '../../src/pdk/index.ts';

/** google/api/annotations.proto and http.proto, as protobufjs ships them. */
const BUNDLED_PROTOS = dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'));

const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** One REST rule: which requests it takes and the gRPC method they become. */
export interface Binding {
  method: string;
  /** The path template, anchored at both ends; its groups are `variables` in order. */
  pattern: OperatorRegex;
  /** The field path each group fills (`name`, `book.name`). */
  variables: string[];
  /** `/package.Service/Method`. */
  grpcPath: string;
  input: protobuf.Type;
  output: protobuf.Type;
  /** `*` (the whole body is the message), a field the body fills, or undefined (query args instead). */
  body: string | undefined;
}

/** The proto's rules by HTTP method (lowercase), in the file's order. */
export type Bindings = Map<string, Binding[]>;

export function loadBindings(file: string): Bindings {
  const bindings: Bindings = new Map();
  for (const { service, method } of methodsOf(file)) {
    for (const rule of httpRules(method)) {
      const binding = bindingOf(service, method, rule);
      if (binding) bindings.set(binding.method, [...(bindings.get(binding.method) ?? []), binding]);
    }
  }
  return bindings;
}

/** A method's message types. */
export interface MethodTypes {
  input: protobuf.Type;
  output: protobuf.Type;
}

/** Every method of the proto's services by its gRPC path (`/package.Service/Method`). */
export function loadMethods(file: string): Map<string, MethodTypes> {
  return new Map(
    methodsOf(file).map(({ service, method }) => [grpcPathOf(service, method), { input: method.resolvedRequestType!, output: method.resolvedResponseType! }]),
  );
}

function methodsOf(file: string): { service: protobuf.Service; method: protobuf.Method }[] {
  return servicesOf(loadProto(resolve(file))).flatMap((service) => service.methodsArray.map((method) => ({ service, method })));
}

function grpcPathOf(service: protobuf.Service, method: protobuf.Method): string {
  const packageName = service.parent && service.parent !== service.root ? `${service.parent.fullName.slice(1)}.` : '';
  return `/${packageName}${service.name}/${method.name}`;
}

function loadProto(path: string): protobuf.Root {
  const root = new protobuf.Root();
  // Imports from the proto's folder first, then google/api from protobufjs (google/protobuf is built in).
  root.resolvePath = (origin, target) => {
    const besideOrigin = resolve(origin ? dirname(origin) : dirname(path), target);
    if (existsSync(besideOrigin)) return besideOrigin;
    const besideProto = resolve(dirname(path), target);
    return existsSync(besideProto) ? besideProto : join(BUNDLED_PROTOS, target);
  };
  try {
    root.loadSync(path, { keepCase: true }).resolveAll();
    return root;
  } catch (err) {
    throw new ConfigCompileError(['proto'], `cannot load ${path}: ${(err as Error).message}`);
  }
}

function servicesOf(namespace: protobuf.NamespaceBase): protobuf.Service[] {
  const found: protobuf.Service[] = [];
  for (const nested of namespace.nestedArray) {
    if (nested instanceof protobuf.Service) found.push(nested);
    else if (nested instanceof protobuf.Namespace) found.push(...servicesOf(nested));
  }
  return found;
}

type HttpRule = Record<string, unknown>;

/** The method's google.api.http rule and its additional bindings (a nested binding's own are not read, as Kong). */
function httpRules(method: protobuf.Method): HttpRule[] {
  const option = method.parsedOptions?.find((o: Record<string, unknown>) => '(google.api.http)' in o)?.['(google.api.http)'] as HttpRule | undefined;
  if (!option) return [];
  const additional = option.additional_bindings;
  return [option, ...(Array.isArray(additional) ? additional : additional ? [additional] : [])] as HttpRule[];
}

function bindingOf(service: protobuf.Service, method: protobuf.Method, rule: HttpRule): Binding | undefined {
  const verb = HTTP_METHODS.find((m) => typeof rule[m] === 'string');
  if (!verb) return undefined;
  const template = rule[verb] as string;
  const { source, variables } = templatePattern(template);
  const pattern = compileOperatorRegex(source, { anchored: true, ignoreCase: false });
  return {
    method: verb,
    pattern,
    variables,
    grpcPath: grpcPathOf(service, method),
    input: method.resolvedRequestType!,
    output: method.resolvedResponseType!,
    body: typeof rule.body === 'string' && rule.body !== '' ? rule.body : undefined,
  };
}

/**
 * google/api/http.proto's path template as a regex: `{var}` and `{var=*}` one segment, `{var=**}` the
 * rest, `{var=a/*}` its own segments; `*` and `**` outside a variable likewise, uncaptured; literals as
 * they are. Matched against the whole path.
 */
export function templatePattern(template: string): { source: string; variables: string[] } {
  const variables: string[] = [];
  let source = '';
  for (const part of template.split(/(\{[^}]*\})/)) {
    const variable = /^\{([\w.]+)(?:=(.*))?\}$/.exec(part);
    if (variable) {
      variables.push(variable[1]);
      source += `(${segmentsPattern(variable[2] ?? '*')})`;
    } else source += segmentsPattern(part);
  }
  return { source: `${source}$`, variables };
}

function segmentsPattern(segments: string): string {
  return segments
    .split('/')
    .map((s) => (s === '**' ? '.+' : s === '*' ? '[^/]+' : s.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')))
    .join('/');
}
