# completion/: bash completion for elidectl.  bashcompletiondir comes from
# configure (pkg-config bash-completion completionsdir, else
# $(datadir)/bash-completion/completions).
bashcompletion_DATA = completion/elidectl
EXTRA_DIST += completion/elidectl
