/** A share of the documents run as pasted (test/docs/paste.ts). */
import { pasteTests, PASTE_SHARDS } from './paste.ts';

pasteTests(2, PASTE_SHARDS);
