/**
 * The plugins this gateway ships (Kong's bundled plugin list). Each is loaded through its entry module only.
 * Read by the command line alone (src/cli.ts), which hands it to what it runs: the gateway, the process
 * model, check, migrate and the store commands.
 */
import acl from '../plugins/acl/index.ts';
import basicAuth from '../plugins/basic-auth/index.ts';
import correlationId from '../plugins/correlation-id/index.ts';
import cors from '../plugins/cors/index.ts';
import entitlementEnforcement from '../plugins/entitlement-enforcement/index.ts';
import hmacAuth from '../plugins/hmac-auth/index.ts';
import ipRestriction from '../plugins/ip-restriction/index.ts';
import jwt from '../plugins/jwt/index.ts';
import keyAuth from '../plugins/key-auth/index.ts';
import ldapAuth from '../plugins/ldap-auth/index.ts';
import metering from '../plugins/metering/index.ts';
import meteringAndBilling from '../plugins/metering-and-billing/index.ts';
import oauth2 from '../plugins/oauth2/index.ts';
import prometheus from '../plugins/prometheus/index.ts';
import proxyCache from '../plugins/proxy-cache/index.ts';
import rateLimiting from '../plugins/rate-limiting/index.ts';
import requestTermination from '../plugins/request-termination/index.ts';
import requestTransformer from '../plugins/request-transformer/index.ts';
import responseRateLimiting from '../plugins/response-ratelimiting/index.ts';
import responseTransformer from '../plugins/response-transformer/index.ts';
import session from '../plugins/session/index.ts';
import requestSizeLimiting from '../plugins/request-size-limiting/index.ts';
import redirect from '../plugins/redirect/index.ts';
import botDetection from '../plugins/bot-detection/index.ts';
import opentelemetry from '../plugins/opentelemetry/index.ts';
import statsd from '../plugins/statsd/index.ts';
import aiProxy from '../plugins/ai-proxy/index.ts';
import aiPromptGuard from '../plugins/ai-prompt-guard/index.ts';
import fileLog from '../plugins/file-log/index.ts';
import httpLog from '../plugins/http-log/index.ts';
import tcpLog from '../plugins/tcp-log/index.ts';
import udpLog from '../plugins/udp-log/index.ts';
import syslog from '../plugins/syslog/index.ts';
import grpcGateway from '../plugins/grpc-gateway/index.ts';
import grpcWeb from '../plugins/grpc-web/index.ts';
import awsLambda from '../plugins/aws-lambda/index.ts';
import type { PluginDefinition } from './pdk/types.ts';

/** In order of creation (the gateway closes them in reverse): request metering after metering, whose writer it uses until it closes. */
export const bundledPlugins: ReadonlyMap<string, PluginDefinition> = new Map(
  [
    oauth2, keyAuth, basicAuth, jwt, acl, metering, entitlementEnforcement, meteringAndBilling, requestTermination, ipRestriction, rateLimiting, cors,
    correlationId, requestTransformer, responseTransformer, prometheus, requestSizeLimiting, redirect,
    botDetection, hmacAuth, proxyCache, responseRateLimiting, opentelemetry, statsd, aiProxy, aiPromptGuard,
    httpLog, fileLog, tcpLog, udpLog, syslog, grpcGateway, grpcWeb, awsLambda, ldapAuth, session,
  ].map((p) => [p.name, p as PluginDefinition]),
);
