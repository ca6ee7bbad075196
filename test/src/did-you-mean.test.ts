/** The "did you mean" helper: typos find their name, unrelated or huge words find none, cheaply. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closestName, didYouMean, editDistance } from '../../src/did-you-mean.ts';

test('edit distance counts insertions, deletions, substitutions and swapped neighbours as one edit each', () => {
  assert.equal(editDistance('metring', 'metering'), 1);
  assert.equal(editDistance('admin_listen', 'admin_lsiten'), 1);
  assert.equal(editDistance('kitten', 'sitting'), 3);
  assert.equal(editDistance('', 'abc'), 3);
  assert.equal(editDistance('abcdef', 'uvwxyz', 2), 3, 'stops past the limit');
});

test('the closest name within one edit per four characters (one to three), case-insensitively, else nothing', () => {
  const fields = ['proxy_listen', 'admin_listen', 'data_dir', 'log_level'];
  assert.equal(closestName('admin_listn', fields), 'admin_listen');
  assert.equal(closestName('Admin_Listen', fields), 'admin_listen');
  assert.equal(closestName('proxy_lisen', fields), 'proxy_listen');
  assert.equal(closestName('colour', fields), undefined);
  assert.equal(closestName('oauth2', ['auth']), undefined, 'two edits in six characters is another word');
  assert.equal(closestName('persistent_refresh_token', ['reuse_refresh_token']), undefined, 'at most three edits');
  assert.equal(closestName('data_dir', fields), undefined, 'an exact name is not a suggestion');
  assert.equal(closestName('', fields), undefined);
  assert.equal(closestName('x'.repeat(1_000_000), ['x'.repeat(1_000_000)]), undefined, 'a huge word is not compared');
  assert.equal(closestName('--conf', ['--config', '--help']), '--config', 'a cut-short name');
  assert.equal(closestName('adm', fields), 'admin_listen');
  assert.equal(closestName('pro', ['proxy_listen', 'protocols']), undefined, 'a prefix of several names');
  assert.equal(didYouMean('metring', ['oauth2', 'metering']), "; did you mean 'metering'?");
  assert.equal(didYouMean('cors', ['oauth2', 'metering']), '');
});
