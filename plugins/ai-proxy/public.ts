/** What other plugins (ai-prompt-guard) may use of ai-proxy: reading an OpenAI-format request as Kong's AI plugins do. */
export { readOpenAiRequest, type OpenAiRequest } from './request.ts';
