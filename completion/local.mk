# completion/: shell completion for elidectl.  The directories come from
# configure: bash's from pkg-config bash-completion (completionsdir), else
# $(datadir)/bash-completion/completions; fish's from pkg-config fish, else
# $(datadir)/fish/vendor_completions.d; zsh's $(datadir)/zsh/site-functions
# (Debian's zsh reads /usr/share/zsh/vendor-completions:
# --with-zshcompletiondir).
bashcompletion_DATA = completion/elidectl
zshcompletion_DATA = completion/_elidectl
fishcompletion_DATA = completion/elidectl.fish
EXTRA_DIST += completion/elidectl completion/_elidectl completion/elidectl.fish
